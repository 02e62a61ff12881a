/* One line per finished request on stderr: method, path, status, prompt and
 * generated tokens, milliseconds; as text or as JSON (--log-format). Also
 * counts the request in the metrics. */
#ifndef HEARTH_ACCESS_LOG_H
#define HEARTH_ACCESS_LOG_H

#include "server/server.h"

/* The http_done_fn of the server (ud is the server). */
void access_log(void *ud, http_req *r);

#endif
