"""The compatibility plane: the GameStream protocol that Moonlight clients speak.

Protocol packages here import no Django views, serializers or requests.
"""
