-- Why a step's loss is what it is when the log did not print one: Megatron omits the interval's
-- loss when it is NaN (the importer stores NaN and says so here), or when every iteration of the
-- interval was skipped (the loss stays NULL). NULL when the loss was logged.
ALTER TABLE training_steps ADD COLUMN loss_reason VARCHAR;
