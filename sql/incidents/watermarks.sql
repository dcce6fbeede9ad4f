-- How far each signal has been evaluated: an incident is resolved only after clean evaluated time.
SELECT signal, max(evaluated_until) AS evaluated_until FROM evaluations GROUP BY signal;
