"""Sensors and schedules: the raw-zone sensor that requests detect runs, the fold and alert passes, the one
`goodput_service` sensor the daemon ticks, and the daily maintenance schedule."""
