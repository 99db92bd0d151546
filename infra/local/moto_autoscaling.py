"""An Auto Scaling group's own CapacityReservationSpecification, kept in front of moto.

moto 5.2 answers CreateAutoScalingGroup and UpdateAutoScalingGroup but drops their
`CapacityReservationSpecification` (the group's Capacity Reservation preference and target:
reservation ids or resource group ARNs), so DescribeAutoScalingGroups never shows one. It keeps
a mixed instances policy whole, distribution segments included. Since 2026 a group reaches
Capacity Blocks either by its launch template's market type or by "a Capacity Reservation
Resource Group as a target on your Auto Scaling group, together with distribution segments"
(Auto Scaling user guide, "Target Capacity Reservations from your Auto Scaling group"), and
`capblock rules validate --check-aws` reads both. This WSGI layer hands every request to moto
and, when moto created or updated a group, sets the specification the request gave on moto's
own group object, which moto's serializer then writes into DescribeAutoScalingGroups as the
API model shapes it. An update without the parameter leaves the group's as it was, as for
every other parameter of UpdateAutoScalingGroup. moto_serial.py runs it under its one lock.
"""

import re
from collections.abc import Callable, Iterable
from io import BytesIO
from typing import Any
from urllib.parse import parse_qs

from moto.autoscaling.models import autoscaling_backends
from moto.autoscaling.responses import AutoScalingResponse
from werkzeug.wrappers import Request

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

ACTIONS = ("CreateAutoScalingGroup", "UpdateAutoScalingGroup")
SPEC = "CapacityReservationSpecification."
TARGET = SPEC + "CapacityReservationTarget."
SCOPE = re.compile(r"Credential=[^/,\s]+/[^/]+/[^/]+/([^/]+)/aws4_request")


def specification(form: dict[str, list[str]]) -> dict[str, Any] | None:
    """The request's CapacityReservationSpecification in the model's shape; None without one."""
    if not any(k.startswith(SPEC) for k in form):
        return None

    def members(name: str) -> list[str]:
        prefix = f"{TARGET}{name}.member."
        keyed = sorted((int(k[len(prefix) :]), v[0]) for k, v in form.items() if k.startswith(prefix))
        return [v for _, v in keyed]

    spec: dict[str, Any] = {}
    if SPEC + "CapacityReservationPreference" in form:
        spec["CapacityReservationPreference"] = form[SPEC + "CapacityReservationPreference"][0]
    target = {
        name: values
        for name in ("CapacityReservationIds", "CapacityReservationResourceGroupArns")
        if (values := members(name))
    }
    if target:
        spec["CapacityReservationTarget"] = target
    return spec


def with_group_capacity_reservations(app: WsgiApp) -> WsgiApp:
    """moto's WSGI app with a group's CapacityReservationSpecification kept."""

    def layered(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        scope = SCOPE.search(environ.get("HTTP_AUTHORIZATION", ""))
        if environ.get("REQUEST_METHOD") != "POST" or not scope or scope.group(1) != "autoscaling":
            return app(environ, start_response)
        request = Request(environ)
        raw = request.get_data()
        environ["wsgi.input"] = BytesIO(raw)
        environ["CONTENT_LENGTH"] = str(len(raw))
        form = parse_qs(raw.decode(errors="replace"))
        spec = specification(form)
        if form.get("Action", [""])[0] not in ACTIONS or spec is None:
            return app(environ, start_response)
        status: list[str] = []

        def remember(code: str, headers: Any, exc_info: Any = None) -> Any:
            status.append(code)
            return start_response(code, headers, exc_info) if exc_info else start_response(code, headers)

        body = list(app(environ, remember))
        if status and status[0].startswith("200"):
            probe = AutoScalingResponse()
            probe.headers = request.headers
            probe.querystring = {}
            account, region = probe.get_current_account(), probe.get_region_from_url(request, request.url)
            group = autoscaling_backends[account][region].autoscaling_groups.get(form["AutoScalingGroupName"][0])
            if group is not None:
                group.capacity_reservation_specification = spec
        return body

    return layered
