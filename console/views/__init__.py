"""The console's page areas, one small module and blueprint per area.

console.mount nests them all in the `jobwarden` blueprint, so their endpoints read
`jobwarden.<area>.<view>` wherever the console is mounted.
"""

from console import auth
from console.views import (
    actions,
    audit,
    bulk,
    failed,
    jobs,
    metrics,
    overview,
    queues,
    review,
    sla,
    users,
    workers,
)

AREAS = (auth, overview, jobs, queues, actions, failed, review, workers, sla, audit, users,
         metrics, bulk)
