/* The kernel templates, embedded in the binary at build time (tools/embed.sh). */
#ifndef GPT2GEN_TEMPLATES_H
#define GPT2GEN_TEMPLATES_H
typedef struct { const char *path; const char *text; } EmbeddedFile;
extern const EmbeddedFile gpt2gen_templates[];   /* ends with { 0, 0 } */
#endif
