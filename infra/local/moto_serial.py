"""moto's server, handling one request at a time.

moto's DynamoDB backend has no locking, and `moto_server` serves requests on threads: two
concurrent conditional writes or transactions on the same item can then both pass their
condition, or one can lose the other's update. Real DynamoDB makes every conditional write and
every transaction atomic, and capblock's exactly-once purchases and budgets rest on that. With
one request at a time, moto keeps the same promise. (The fault-injection suite found it: five
overlapping runs lost an increment on the shared account-budget item.)

In front of moto sit three layers, under the same lock: moto_resource_groups.py, which answers
Resource Groups' GroupResources, UngroupResources and ListGroupResources (moto 5.2.5 has none of
them) on moto's own groups; moto_events.py, which delivers EventBridge PutEvents entries
meant for another account's bus to that account, as that bus's policy allows (moto puts them on
the caller's own bus); and moto_autoscaling.py, which keeps the CapacityReservationSpecification
an Auto Scaling group is created or updated with (moto drops it).

Same options as moto_server: -H HOST -p PORT.
"""

import argparse
import os
import signal
import sys
import threading

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from moto_autoscaling import with_group_capacity_reservations
from moto_events import with_cross_account_events
from moto_resource_groups import with_group_membership
from werkzeug.serving import run_simple


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, default=5000)
    args = parser.parse_args()
    os.environ.setdefault("MOTO_PORT", str(args.port))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))

    app = with_group_capacity_reservations(
        with_cross_account_events(with_group_membership(DomainDispatcherApplication(create_backend_app)))
    )
    lock = threading.Lock()

    def serial(environ, start_response):
        # Connections are still accepted on threads; only the backend work is serialised.
        with lock:
            return list(app(environ, start_response))

    run_simple(args.host, args.port, serial, threaded=True, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    main()
