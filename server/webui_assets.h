/* The chat page's files, embedded at build time (server/webui/embed.py). */
#ifndef HEARTH_WEBUI_ASSETS_H
#define HEARTH_WEBUI_ASSETS_H

#include <stddef.h>

typedef struct webui_asset {
    const char *path;          /* "/" or "/webui/app.js" */
    const char *content_type;
    const unsigned char *data;
    size_t len;
} webui_asset;

/* Terminated by an entry with path == NULL. */
extern const webui_asset webui_assets[];

#endif
