-- How far each signal has evaluated each partition: an incident is resolved only after clean, evaluated time.
SELECT signal, partition_start, evaluated_until FROM evaluations ORDER BY signal, partition_start;
