"""The alerting names other modules import from here (the code lives in orchestration/alerting/)."""

from orchestration.alerting.config import (  # noqa: F401
    DEFAULT_CONFIG,
    AlertingConfig,
    AlertingConfigError,
    Match,
    Monitor,
    Retry,
    Route,
    SinkSpec,
    load_config,
)
from orchestration.alerting.delivery import DeliveryError, Sink, SinkInactive, deliver, http_client  # noqa: F401
from orchestration.alerting.journal import (  # noqa: F401
    AlertJournal,
    backoff_until,
    finished,
    journal_path,
    mirror_journal,
)
from orchestration.alerting.payloads import (  # noqa: F401
    PAGERDUTY_SEVERITY,
    TRANSITION_EMOJI,
    dedup_key,
    pagerduty_event,
    slack_escape,
    slack_message,
    summary,
    utc_timestamp,
    webhook_body,
)
from orchestration.alerting.resource import AlertingResource, alerting_resource_for  # noqa: F401
