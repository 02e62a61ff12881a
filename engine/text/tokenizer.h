/* Tokenizers read from GGUF metadata: SentencePiece-style (`llama`) and
 * byte-level BPE (`gpt2`, with the pre-tokenizer named by tokenizer.ggml.pre). */
#ifndef HEARTH_TOKENIZER_H
#define HEARTH_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

struct gguf_file;
typedef struct tokenizer tokenizer;

/* NULL with a one-line message in err (missing or malformed vocabulary,
 * unknown tokenizer model or pre-tokenizer). */
tokenizer *tokenizer_load(const struct gguf_file *g, char *err, size_t errlen);
void tokenizer_free(tokenizer *t);

/* Encode text (len bytes, any bytes). add_special: BOS/EOS as the model's
 * metadata says; parse_special: control/user-defined tokens written in the
 * text become their ids. Returns a malloc'd array in *out and the count,
 * or -1 on allocation failure. */
int tokenizer_encode(const tokenizer *t, const char *text, size_t len,
                     bool add_special, bool parse_special, int32_t **out);

int tokenizer_n_vocab(const tokenizer *t);
int32_t tokenizer_bos(const tokenizer *t);   /* -1 if none */
int32_t tokenizer_eos(const tokenizer *t);
int32_t tokenizer_eot(const tokenizer *t);   /* end-of-turn, -1 if none */
bool tokenizer_add_bos(const tokenizer *t);
bool tokenizer_add_eos(const tokenizer *t);
/* end of generation: eos, eot, and other EOG tokens (<|im_end|>, <|eot_id|>, <end_of_turn>, ...) */
bool tokenizer_is_eog(const tokenizer *t, int32_t id);
bool tokenizer_is_control(const tokenizer *t, int32_t id);
/* Look up a token by its exact text (e.g. "<|fim_prefix|>"); -1 if absent. */
int32_t tokenizer_find(const tokenizer *t, const char *text);
/* Fill-in-the-middle tokens from metadata (or found by their usual text), -1 if absent. */
int32_t tokenizer_fim_pre(const tokenizer *t);
int32_t tokenizer_fim_suf(const tokenizer *t);
int32_t tokenizer_fim_mid(const tokenizer *t);

/* The bytes a token stands for when decoded (byte-level mapping undone,
 * SentencePiece's U+2581 turned into a space, <0xNN> into the byte).
 * Control tokens decode to their text only when render_special. */
size_t tokenizer_token_bytes(const tokenizer *t, int32_t id, bool render_special,
                             char *buf, size_t cap);
/* The raw vocabulary string of a token (as stored), or NULL for a bad id. */
const char *tokenizer_token_text(const tokenizer *t, int32_t id);

/* Decode ids to a malloc'd NUL-terminated string (*out_len bytes).
 * The SentencePiece leading space after BOS is removed, as llama.cpp does. */
char *tokenizer_decode(const tokenizer *t, const int32_t *ids, int n, bool render_special, size_t *out_len);

/* Streaming detokenizer: never emits a partial UTF-8 character. */
typedef struct detok_stream {
    const tokenizer *t;
    bool render_special;
    bool at_start;          /* strip SentencePiece's leading space on the first piece */
    char pending[8];
    int n_pending;
} detok_stream;
void detok_init(detok_stream *s, const tokenizer *t, bool render_special);
/* Append the complete characters of token id to out (cap bytes); returns
 * the byte count. Invalid sequences are passed through once it is clear
 * they cannot complete. */
size_t detok_push(detok_stream *s, int32_t id, char *out, size_t cap);
/* Whatever is still pending at the end (an incomplete character). */
size_t detok_flush(detok_stream *s, char *out, size_t cap);
/* Added by the tokenizer: the longest piece any token decodes to (specials
 * rendered included), in bytes. detok_push never cuts a piece when
 * cap >= tokenizer_max_piece(t) + 4; tokenizer_token_bytes copies at most
 * cap bytes and returns the count copied. */
size_t tokenizer_max_piece(const tokenizer *t);

struct gguf_writer;
/* Read a Hugging Face tokenizer.json and write its vocabulary as GGUF
 * tokenizer.* metadata (model gpt2 or llama, tokens, token_type, merges,
 * special ids, pre = `pre` when not NULL). 0 or -1 with err. */
int vocab_from_tokenizer_json(const char *json_path, const char *pre,
                              struct gguf_writer *w, int *n_vocab_out, char *err, size_t errlen);
/* Copy the tokenizer.* metadata of a vocab-only (or any) GGUF into w. */
int vocab_from_gguf(const char *gguf_path, struct gguf_writer *w, int *n_vocab_out,
                    char *err, size_t errlen);

#endif
