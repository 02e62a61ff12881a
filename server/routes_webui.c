/* GET / and GET /webui/NAME: the chat page, served from the copy embedded at build
 * time. The page is served without an API key (it asks for one and sends it
 * with its own requests) under a Content-Security-Policy that allows only
 * this server's own script, style and connections: no inline script runs,
 * so text a model writes can never execute even if it reached the DOM. */
#include "server/routes.h"
#include "server/errors.h"
#include "server/webui_assets.h"
#include <string.h>

#define WEBUI_CSP "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " \
                  "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

static const webui_asset *webui_find(const char *path) {
    for (const webui_asset *a = webui_assets; a->path; a++)
        if (!strcmp(a->path, path)) return a;
    return NULL;
}

void route_webui(server *s, http_req *r, const cJSON *body) {
    (void)body;
    const char *path = http_path(r);
    const webui_asset *a = s->o.no_webui ? NULL : webui_find(path);
    if (!a) {
        respond_error(r, 404, NULL, "not_found", "Not found: %.200s", path);
        return;
    }
    http_add_header(r, "Content-Security-Policy", WEBUI_CSP);
    http_add_header(r, "X-Content-Type-Options", "nosniff");
    http_add_header(r, "Referrer-Policy", "no-referrer");
    http_add_header(r, "Cache-Control", "no-cache");
    http_respond(r, 200, a->content_type, (const char *)a->data, a->len);
}
