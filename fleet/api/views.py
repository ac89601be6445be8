"""The fleet's management routes: on a member, the placement ticket (`fleet/tickets.py`); on
the fleet host, its members' sessions (`fleet/member_sessions.py`). Thin views."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response

from apikit.base import ConsoleMgmtAPIView, MgmtAPIView, json_object
from apikit.schema import error
from fleet import member_sessions, tickets

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


_MemberSessions = inline_serializer(
    "FleetMemberSession",
    {
        "id": serializers.CharField(help_text="the member's session id, 8 hex digits"),
        "plane": serializers.CharField(),
        "client": serializers.CharField(allow_blank=True),
        "app_title": serializers.CharField(allow_blank=True),
        "mode": serializers.CharField(allow_blank=True),
        "state": serializers.CharField(allow_blank=True),
    },
    many=True,
)
_MEMBER_DOWN = {503: error("the member could not be asked (why, and `Retry-After`)")}


class MemberSessionsView(ConsoleMgmtAPIView):
    """A member's live sessions, read from the member (the console's fleet page too)."""

    @extend_schema(
        responses={200: _MemberSessions, 404: error("no such member"), **_MEMBER_DOWN},
        summary="A member's live sessions",
    )
    def get(self, request, member_id: int):
        return Response(member_sessions.live(member_id))


class MemberSessionView(ConsoleMgmtAPIView):
    """End one session on a member."""

    @extend_schema(
        request=None,
        responses={
            204: None,
            400: error("malformed session id"),
            404: error("no such member, or no such live session on it"),
            **_MEMBER_DOWN,
        },
        summary="End a session on a member",
    )
    def delete(self, request, member_id: int, session_id: str):
        member_sessions.end(member_id, session_id)
        return Response(status=204)
