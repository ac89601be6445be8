"""Management API views of the fleet (docs/fleet.md). Thin: `fleet.membership`,
`access.fleet_tokens`, `fleet.identity`, `fleet.tickets` and `fleet.member_sessions` do the work.

Member side: the fleet tokens this host's admin mints, `whoami`, the identity a joining operator
pins, and the placement ticket a fleet host asks for. Fleet side: the members and their
sessions. Every route but `whoami` and `tickets` is the admin's only (the plugin and fleet
tokens get 403, `access/mgmt.py`); the console calls them with its login session
(`ConsoleMgmtAPIView`, CSRF on writes).
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from redis.exceptions import RedisError
from rest_framework import serializers
from rest_framework.response import Response

from access import fleet_tokens, mgmt
from apikit.base import ConsoleMgmtAPIView, MgmtAPIView, json_object
from apikit.errors import ApiError
from apikit.schema import error
from fleet import buffer as fleet_buffer
from fleet import identity, member_sessions, membership, tickets, view
from fleet.models import Member


class FleetGpuSerializer(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()
    vendor = serializers.CharField()
    vram_mb = serializers.IntegerField(allow_null=True)


class FleetDisplaysSerializer(serializers.Serializer):
    total = serializers.IntegerField()
    active = serializers.IntegerField()
    lingering = serializers.IntegerField()
    pinned = serializers.IntegerField()


class FleetTitleSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="the member's own id (`desktop`, `custom:3`, ...)")
    name = serializers.CharField()


class FleetRelaySerializer(serializers.Serializer):
    state = serializers.ChoiceField(choices=["connected", "backing_off", "stopped"])
    error = serializers.CharField(allow_blank=True, help_text="why it is not connected")


class FleetMemberSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField(help_text="what the member reports (not its identity)")
    previous_name = serializers.CharField(
        allow_null=True, help_text="the name it reported before it changed"
    )
    url = serializers.CharField()
    fingerprint = serializers.CharField(help_text="the pinned certificate's SHA-256")
    reachable = serializers.BooleanField()
    error = serializers.CharField(help_text="why the last refresh failed; '' when it did not")
    version = serializers.CharField(allow_null=True)
    live_sessions = serializers.IntegerField(allow_null=True)
    max_sessions = serializers.IntegerField(allow_null=True, help_text="the member's own limit")
    free_slots = serializers.IntegerField(
        allow_null=True, help_text="max_sessions - live_sessions; null when the limit is unknown"
    )
    encoder = serializers.CharField(
        allow_null=True, help_text="what a session there would encode on (nvenc, software, ...)"
    )
    titles = FleetTitleSerializer(
        many=True, help_text="what a player may pick there: the Desktop and its library"
    )
    relay = FleetRelaySerializer(
        allow_null=True, help_text="the member's event relay; null when it has none (yet)"
    )
    gpus = FleetGpuSerializer(many=True)
    gpu_selected = serializers.CharField(allow_null=True)
    gpu_active = serializers.CharField(allow_null=True)
    displays = FleetDisplaysSerializer(allow_null=True)
    refreshed_at = serializers.DateTimeField(allow_null=True)
    refresh_ms = serializers.FloatField(allow_null=True)
    created_at = serializers.DateTimeField()


class FleetTokenIssuedSerializer(serializers.Serializer):
    name = serializers.CharField()
    created = serializers.CharField(help_text="ISO 8601, UTC")


_JOIN = inline_serializer(
    "FleetJoin",
    {
        "url": serializers.CharField(help_text="https://host:port of the member"),
        "token": serializers.CharField(help_text="a fleet token the member minted (64 hex)"),
        "fingerprint": serializers.CharField(help_text="the member's certificate SHA-256"),
    },
)


def _relay_states() -> dict[int, dict]:
    """The relays' states; none shown (rather than the listing failing) when Redis is out of
    reach."""
    try:
        return fleet_buffer.relay_states()
    except RedisError:
        return {}


class MembersView(ConsoleMgmtAPIView):
    @extend_schema(
        responses=FleetMemberSerializer(many=True),
        summary="The fleet's members and their state",
    )
    def get(self, request):
        relays = _relay_states()
        return Response([view.public(m, relays.get(m.id)) for m in Member.objects.all()])

    @extend_schema(
        request=_JOIN,
        responses={
            201: FleetMemberSerializer,
            400: error("a field is invalid (`fields`), or the fingerprint is this host's"),
            409: error("already a member"),
            422: error(
                "fingerprint mismatch (nothing sent), or a token the member refuses "
                "or that is not a fleet token"
            ),  # fmt: skip
            502: error("the member could not be reached or answered badly"),
            504: error("the member did not answer in time"),
        },
        summary="Join a member",
    )
    def post(self, request):
        member = membership.join(json_object(request))
        member.refresh_from_db()
        return Response(view.public(member, _relay_states().get(member.id)), status=201)


class MemberView(ConsoleMgmtAPIView):
    @extend_schema(
        responses={200: FleetMemberSerializer, 404: error("no such member")}, summary="A member"
    )
    def get(self, request, member_id: int):
        member = membership.get(member_id)
        return Response(view.public(member, _relay_states().get(member.id)))

    @extend_schema(
        responses={204: None, 404: error("no such member")},
        summary="Remove a member (and the token kept for it)",
    )
    def delete(self, request, member_id: int):
        membership.remove(member_id)
        return Response(status=204)


class TokensView(ConsoleMgmtAPIView):
    @extend_schema(
        responses=FleetTokenIssuedSerializer(many=True),
        summary="Fleet tokens this host issued",
    )
    def get(self, request):
        return Response([{"name": t.name, "created": t.created} for t in fleet_tokens.listing()])

    @extend_schema(
        request=inline_serializer("FleetTokenMint", {"name": serializers.CharField()}),
        responses={
            201: inline_serializer(
                "FleetTokenMinted",
                {"name": serializers.CharField(), "token": serializers.CharField()},
            ),
            400: error("invalid name"),
            409: error("the name is taken"),
        },
        summary="Mint a fleet token (shown once)",
    )
    def post(self, request):
        name = json_object(request).get("name")
        try:
            token = fleet_tokens.mint(name)
        except fleet_tokens.FleetTokenError as exc:
            raise ApiError(exc.status, str(exc)) from None
        response = Response({"name": name, "token": token}, status=201)
        response["Cache-Control"] = "no-store"
        return response


class TokenView(ConsoleMgmtAPIView):
    @extend_schema(
        responses={204: None, 400: error("not a token name"), 404: error("no such token")},
        summary="Revoke a fleet token",
    )
    def delete(self, request, name: str):
        try:
            fleet_tokens.revoke(name)
        except fleet_tokens.FleetTokenError as exc:
            raise ApiError(exc.status, str(exc)) from None
        return Response(status=204)


class IdentityView(ConsoleMgmtAPIView):
    @extend_schema(
        responses=inline_serializer(
            "FleetIdentity",
            {
                "fingerprint": serializers.CharField(allow_null=True),
                "urls": serializers.ListField(child=serializers.CharField()),
            },
        ),
        summary="What a fleet host pins to join this one",
    )
    def get(self, request):
        return Response(identity.describe())


def _reach(role: str) -> list[str]:
    table = {"plugin": mgmt.PLUGIN_ALLOWED, "fleet": mgmt.FLEET_ALLOWED}.get(role)
    if table is None:
        return ["*"]
    return sorted(f"{m} /api/v1/{route}" for route, methods in table.items() for m in methods)


class WhoamiView(MgmtAPIView):
    @extend_schema(
        responses=inline_serializer(
            "FleetWhoami",
            {
                "role": serializers.ChoiceField(choices=["admin", "plugin", "fleet"]),
                "reach": serializers.ListField(
                    child=serializers.CharField(), help_text="`METHOD /path`; `*`: every route"
                ),
            },
        ),
        summary="Who the presented credential is, and what it may call",
    )
    def get(self, request):
        role = request.user.role
        return Response({"role": role, "reach": _reach(role)})


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
