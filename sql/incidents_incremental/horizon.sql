-- The latest evaluated time of any signal: an empty partition mark counts as evaluated once it is past.
SELECT max(evaluated_until) AS horizon FROM evaluations;
