"""The console's page areas, one small module and blueprint per area.

console.mount nests them all in the `jobwarden` blueprint, so their endpoints read
`jobwarden.<area>.<view>` wherever the console is mounted.
"""

from console import auth
from console.views import (
    actions,
    alerts,
    audit,
    bulk,
    failed,
    jobs,
    metrics,
    overview,
    queues,
    review,
    schedules,
    sla,
    users,
    workers,
)

AREAS = (auth, overview, alerts, jobs, queues, schedules, actions, failed, review, workers,
         sla, audit, users, metrics, bulk)
