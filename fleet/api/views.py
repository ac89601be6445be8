"""Management API views of the fleet (docs/fleet.md). Thin: `fleet.membership`,
`access.fleet_tokens` and `fleet.identity` do the work.

Member side: the fleet tokens this host's admin mints, `whoami` and the identity a joining
operator pins. Fleet side: the members. Every route but `whoami` is the admin's only (the
plugin and fleet tokens get 403, `access/mgmt.py`); the console calls them with its login
session (`ConsoleMgmtAPIView`, CSRF on writes).
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response

from access import fleet_tokens, mgmt
from apikit.base import ConsoleMgmtAPIView, MgmtAPIView, json_object
from apikit.errors import ApiError
from apikit.schema import error
from fleet import identity, membership, view
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


class MembersView(ConsoleMgmtAPIView):
    @extend_schema(
        responses=FleetMemberSerializer(many=True),
        summary="The fleet's members and their state",
    )
    def get(self, request):
        return Response([view.public(m) for m in Member.objects.all()])

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
        return Response(view.public(member), status=201)


class MemberView(ConsoleMgmtAPIView):
    @extend_schema(
        responses={200: FleetMemberSerializer, 404: error("no such member")}, summary="A member"
    )
    def get(self, request, member_id: int):
        return Response(view.public(membership.get(member_id)))

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
