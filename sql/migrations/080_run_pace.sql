-- A synchronous job's pace is its slowest rank: per step the longest of the ranks' step times, per
-- minute the median over the minute's steps, with its own trailing baseline. The median across
-- ranks (`step_seconds`) jumps when one rank of a mixed-speed job (half fast, half slow) crosses
-- between the groups although the job's pace did not change (issue 17, item 5).
ALTER TABLE run_minutes ADD COLUMN pace_seconds DOUBLE;
ALTER TABLE run_minutes ADD COLUMN pace_seconds_baseline DOUBLE;
ALTER TABLE run_minutes ADD COLUMN pace_seconds_mad DOUBLE;
