"""Both APIs answer JSON whatever the Accept header says: no 406 for a browser's text/html."""

from rest_framework.negotiation import BaseContentNegotiation


class JsonOnlyNegotiation(BaseContentNegotiation):
    def select_parser(self, request, parsers):
        for parser in parsers:
            if request.content_type.split(";")[0].strip().lower() == parser.media_type:
                return parser
        return None

    def select_renderer(self, request, renderers, format_suffix=None):
        renderer = renderers[0]
        return (renderer, renderer.media_type)
