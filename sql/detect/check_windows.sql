-- How far each live-windowed signal's stored results of partition $start reach, and from which minute their
-- inputs changed since (migration 180; checks/windowed.py decides from it whether a live run judges a window).
SELECT signal, evaluated_until, dirty_from, version FROM check_windows WHERE partition_start = $start;
