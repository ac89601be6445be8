"""The fleet's management routes on a member: thin views over `fleet/tickets.py`."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response

from apikit.base import MgmtAPIView, json_object
from apikit.schema import error
from fleet import tickets

_TicketRequest = inline_serializer(
    "FleetTicketRequest",
    {
        "app": serializers.CharField(help_text="the app's id as this host's /play offers it"),
        "name": serializers.CharField(help_text="the player's device name"),
        "by": serializers.CharField(required=False, help_text="the fleet host's name (shown)"),
    },
)
_Ticket = inline_serializer(
    "FleetTicket",
    {"ticket": serializers.CharField(), "expires_in_secs": serializers.IntegerField()},
)


class TicketsView(MgmtAPIView):
    """A fleet host vouches for one player: a one-use ticket for one app and player name."""

    needs_redis = True

    @extend_schema(
        request=_TicketRequest,
        responses={201: _Ticket, 404: error("no such app on this host")},
        summary="Mint a placement ticket",
    )
    def post(self, request):
        response = Response(tickets.vouch(json_object(request)), status=201)
        response["Cache-Control"] = "no-store"
        return response
