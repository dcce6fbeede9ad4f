"""The Dagster UI tells the story: every asset has a group, a kind and a description, every check a
description, and the schedule and sensors are on by default (so `goodput ui` keeps detecting)."""

import dagster as dg

from orchestration.definitions import defs


def test_every_asset_has_a_group_a_kind_and_a_description():
    graph = defs.resolve_asset_graph()
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        assert node.group_name and node.group_name != "default", key
        assert node.kinds, key
        assert node.description and len(node.description) > 40, key


def test_every_check_has_a_description():
    graph = defs.resolve_asset_graph()
    assert graph.asset_check_keys
    for check in graph.asset_check_keys:
        assert graph.get_check_spec(check).description, check


def test_schedule_and_sensors_are_on_by_default():
    for schedule in defs.schedules:
        assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING, schedule.name
    for name in ("goodput_service",):
        assert defs.resolve_sensor_def(name).default_status == dg.DefaultSensorStatus.RUNNING, name
