-- Forget what the fold saw (`goodput refold`): the next fold folds every group.
DELETE FROM fold_seen;
DELETE FROM fold_evaluations;
DELETE FROM fold_incidents;
DELETE FROM fold_checkpoints;
DELETE FROM fold_versions;
DELETE FROM fold_meta;
