/* test_chat_template.c — chat template recognition and rendering.
 * Without arguments: recognition of the supported families, the errors for unsupported templates and for
 * conversations a template rejects. With a JSON file (written by tests/py/test_chat_template.py): renders
 * each case and compares with the jinja2 rendering stored in it; exit 1 on any difference. */
#include "assay/chat_template.h"
#include "assay/json.h"
#include "check.h"

static int run_cases(const char *path) {
    assay_json_doc *doc;
    CHECK_OK(assay_json_parse_file(path, &doc));
    if (check_failed) return check_finish("chat_template cases");
    int i = 0;
    for (const assay_json *c = assay_json_root(doc)->first; c; c = c->next, i++) {
        const char *name = assay_json_string(assay_json_get(c, "name"), "?");
        assay_chat_template *ct = NULL;
        assay_status st = assay_chat_template_parse(&ct, assay_json_string(assay_json_get(c, "template"), ""),
                                                    assay_json_string(assay_json_get(c, "bos"), NULL),
                                                    assay_json_string(assay_json_get(c, "eos"), NULL));
        const char *want_family = assay_json_string(assay_json_get(c, "family"), "");
        if (st != ASSAY_OK) {
            fprintf(stderr, "case %d (%s): %s\n", i, name, assay_last_error());
            CHECK(st == ASSAY_OK);
            continue;
        }
        CHECK(strcmp(assay_chat_template_name(ct), want_family) == 0);
        const assay_json *msgs = assay_json_get(c, "messages");
        assay_chat_message m[32];
        int n = 0;
        for (const assay_json *e = msgs ? msgs->first : NULL; e && n < 32; e = e->next, n++) {
            m[n].role = assay_json_string(assay_json_get(e, "role"), NULL);
            m[n].content = assay_json_string(assay_json_get(e, "content"), NULL);
        }
        assay_strbuf out = {0};
        st = assay_chat_template_render(ct, m, n, assay_json_bool(assay_json_get(c, "add_generation_prompt"), 0), &out);
        const assay_json *want = assay_json_get(c, "expected");
        const char *err = assay_json_string(assay_json_get(c, "error"), NULL);
        if (err) {
            CHECK(st == ASSAY_ERR_ARG);
            if (st == ASSAY_ERR_ARG && !strstr(err, assay_last_error())) {
                fprintf(stderr, "case %d (%s): error '%s', jinja raised '%s'\n", i, name, assay_last_error(), err);
                CHECK(0);
            }
        } else if (st != ASSAY_OK || !want || out.len != want->str_len || memcmp(out.data, want->str, out.len) != 0) {
            fprintf(stderr, "case %d (%s) differs:\n--- assay\n%s\n--- jinja\n%s\n---\n", i, name, out.data ? out.data : "(null)",
                    want ? want->str : "(error)");
            CHECK(0);
        } else {
            CHECK(1);
        }
        assay_strbuf_free(&out);
        assay_chat_template_free(ct);
    }
    assay_json_doc_free(doc);
    return check_finish("chat_template cases");
}

int main(int argc, char **argv) {
    if (argc > 1) return run_cases(argv[1]);
    assay_chat_template *ct;
    CHECK_OK(assay_chat_template_parse(&ct, "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}", NULL, NULL));
    CHECK(strcmp(assay_chat_template_name(ct), "chatml") == 0 && !assay_chat_template_writes_bos(ct));
    assay_chat_template_free(ct);
    /* unsupported templates name what they look like */
    CHECK(assay_chat_template_parse(&ct, "{{'<|im_start|>'}}{% if enable_thinking %}<think>{% endif %}", NULL, NULL) == ASSAY_ERR_UNSUPPORTED);
    CHECK(strstr(assay_last_error(), "Qwen3") != NULL);
    CHECK(assay_chat_template_parse(&ct, "{{ '<|user|>' + message['content'] + '<|end|>' }}", NULL, NULL) == ASSAY_ERR_UNSUPPORTED);
    CHECK(strstr(assay_last_error(), "Phi-3") != NULL);
    CHECK(assay_chat_template_parse(&ct, "Human: {{ x }}", NULL, NULL) == ASSAY_ERR_UNSUPPORTED);
    CHECK(strstr(assay_last_error(), "Human: {{ x }}") != NULL);
    CHECK(assay_chat_template_parse(&ct, "", NULL, NULL) == ASSAY_ERR_UNSUPPORTED);
    CHECK(assay_chat_template_builtin(&ct, "vicuna", NULL, NULL) == ASSAY_ERR_ARG);
    /* a conversation the template rejects */
    CHECK_OK(assay_chat_template_builtin(&ct, "gemma", "<bos>", "<eos>"));
    assay_chat_message bad[] = {{"user", "a"}, {"user", "b"}};
    assay_strbuf out = {0};
    CHECK(assay_chat_template_render(ct, bad, 2, 1, &out) == ASSAY_ERR_ARG);
    CHECK(strstr(assay_last_error(), "alternate") != NULL);
    assay_strbuf_free(&out);
    assay_chat_template_free(ct);
    return check_finish("chat_template");
}
