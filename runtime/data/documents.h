/* documents: an input's bytes, as they stream by, cut into documents for `gpt2gen prepare`.
 *
 *   DocSplitter d;
 *   docsplit_init(&d, &opts, CORPUS_TEXT, "notes.txt", sink);
 *   while (more bytes) if (docsplit_feed(&d, buf, n, &err)) ...;
 *   if (docsplit_finish(&d, &err)) ...;     // the input ended
 *   docsplit_free(&d);
 *
 * The sink is told a document's text, in pieces of any size (text), then that it ended (end). Separator
 * lines belong to no document. Whether a document is blank (whitespace only) is the sink's business.
 *
 * JSON lines (CORPUS_JSONL): each line is one JSON object, and its string field (opts.field, "text" by
 * default) is one document, exactly (escapes undone, "\u0000" allowed). Lines of only whitespace are
 * skipped. Any other line is an error naming the file and the line: not JSON, not an object, no such field,
 * or a field that is not a string, or longer than DOCS_MAX_JSON_LINE. A file that starts with "[" (one JSON
 * array) is refused with how to turn it into lines.
 *
 * Text (CORPUS_TEXT), by opts.mode:
 *   DOCS_SEPARATOR  a line holding only opts.separator ("%" by default: fortune files), a trailing "\r"
 *                   allowed, ends a document;
 *   DOCS_BLANK      a run of blank lines (empty, or only spaces, tabs, "\r", "\v", "\f") ends one;
 *   DOCS_LINES      every line is a document (its "\n" included);
 *   DOCS_NONE       the whole file is one document;
 *   DOCS_AUTO       DOCS_SEPARATOR when a separator line comes within the first DOCS_AUTO_PEEK bytes (or
 *                   the whole input, when shorter), else DOCS_BLANK. So fortune files split as they always
 *                   did, and other text at its paragraphs.
 * A document's text is the bytes between two separators: its last line keeps its "\n". */
#ifndef GPT2GEN_DOCUMENTS_H
#define GPT2GEN_DOCUMENTS_H
#include <stddef.h>
#include "common/err.h"
#include "runtime/data/corpus.h"

typedef enum { DOCS_AUTO, DOCS_SEPARATOR, DOCS_BLANK, DOCS_LINES, DOCS_NONE } DocsMode;

#define DOCS_AUTO_PEEK      (1u << 20)
#define DOCS_MAX_SEPARATOR  256
#define DOCS_MAX_JSON_LINE  (1u << 30)   /* a JSON line is held whole while it is parsed */

typedef struct {
    DocsMode    mode;
    const char *separator;    /* DOCS_SEPARATOR's line; "%" when NULL */
    const char *field;        /* JSON lines' field; "text" when NULL */
} DocsOptions;

typedef struct {
    int  (*text)(void *ctx, const char *s, size_t n, Err *err);
    int  (*end)(void *ctx, Err *err);
    void  *ctx;
} DocSink;

typedef struct {
    DocsOptions opt;
    CorpusKind  kind;
    DocsMode    mode;         /* DOCS_AUTO until the peek decides */
    const char *name;         /* the input, for messages */
    DocSink     sink;
    char       *line;         /* JSON lines: the line so far; text: the line while it may be a separator */
    size_t      len, cap;
    int         in_text;      /* text: the current line is known not to be a separator; its bytes go out */
    size_t      line_no;      /* complete lines so far */
    char       *peek;         /* DOCS_AUTO: what came before the mode was decided */
    size_t      peek_len, peek_cap, peek_scan;
    int         sep_line;     /* DOCS_AUTO: a separator line seen in the peek */
} DocSplitter;

void docsplit_init(DocSplitter *d, const DocsOptions *opt, CorpusKind kind, const char *name, DocSink sink);
int  docsplit_feed(DocSplitter *d, const char *s, size_t n, Err *err);
int  docsplit_finish(DocSplitter *d, Err *err);
void docsplit_free(DocSplitter *d);
/* The mode name ("auto", "separator", "blank", "lines", "none") -> mode; -1 when unknown. */
int  docs_mode_of(const char *name);
#endif
