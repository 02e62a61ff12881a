/* The endpoints. Each gets the parsed JSON body (NULL for GET) and answers r. */
#ifndef HEARTH_ROUTES_H
#define HEARTH_ROUTES_H

#include <cjson/cJSON.h>
#include "server/server.h"
#include "server/errors.h"

/* routes_oai.c */
void route_chat(server *s, http_req *r, const cJSON *body);
void route_completions(server *s, http_req *r, const cJSON *body);
/* routes_llama.c */
void route_completion(server *s, http_req *r, const cJSON *body);
void route_infill(server *s, http_req *r, const cJSON *body);
void route_tokenize(server *s, http_req *r, const cJSON *body);
void route_detokenize(server *s, http_req *r, const cJSON *body);
void route_apply_template(server *s, http_req *r, const cJSON *body);
/* routes_embed.c: OpenAI's /v1/embeddings, llama-server's /embedding */
void route_embeddings(server *s, http_req *r, const cJSON *body);
void route_embedding(server *s, http_req *r, const cJSON *body);
/* routes_info.c */
void route_models(server *s, http_req *r, const cJSON *body);
void route_model(server *s, http_req *r, const cJSON *body);   /* GET /v1/models/{id} */
void route_health(server *s, http_req *r, const cJSON *body);
void route_props(server *s, http_req *r, const cJSON *body);
void route_slots(server *s, http_req *r, const cJSON *body);
void route_metrics(server *s, http_req *r, const cJSON *body);
void route_cache(server *s, http_req *r, const cJSON *body);   /* GET and DELETE /cache */
/* routes_webui.c: the chat page (GET / and /webui/...) */
void route_webui(server *s, http_req *r, const cJSON *body);

#endif
