-- vLLM preemptions (`vllm:num_preemptions_total`): the engine recomputes or swaps out a running
-- sequence when the KV cache cannot grow it, and throws away that sequence's prefill work. A healthy
-- engine preempts nothing; preemptions minute after minute mean the batch is over capacity.

-- The counter as pulled (summed over the engine's labels); null where the source does not export it.
ALTER TABLE serving_metrics ADD COLUMN preemptions_total DOUBLE;

-- The counter's increase in the minute (a counter that went down was reset: the increase is its new
-- value); null where the minute's scrapes carry no counter.
ALTER TABLE serving_minutes ADD COLUMN preemptions DOUBLE;
