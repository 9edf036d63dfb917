/* test_tokenizer_nfc.c — tlm_nfc (src/tokenizer/nfc.c) against Python's unicodedata.normalize:
 * data/nfc_cases.json holds [input, NFC(input)] pairs made by gen_nfc_cases.py. Also checks
 * that ASCII and already-NFC text come back unchanged. */
#include "tok_test.h"
#include "tokenizer/nfc.h"

#include <cjson/cJSON.h>

int main(void) {
    char *data = test_read_file(TLM_TOK_TEST_DATA "/nfc_cases.json", NULL);
    cJSON *j = cJSON_Parse(data);
    free(data);
    if (!j) return 2;
    const char *uv = cJSON_GetObjectItem(j, "unicode")->valuestring;
    CHECK(strcmp(uv, tlm_nfc_unicode_version) == 0); /* tables and cases from the same Unicode version */
    int n = 0, bad = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(j, "cases")) {
        const char *in = cJSON_GetArrayItem(c, 0)->valuestring, *want = cJSON_GetArrayItem(c, 1)->valuestring;
        size_t len;
        char *got = tlm_nfc(in, strlen(in), &len);
        n++;
        if (!got || len != strlen(want) || memcmp(got, want, len) != 0) {
            if (bad++ < 20) {
                fprintf(stderr, "NFC mismatch for");
                for (const unsigned char *p = (const unsigned char *)in; *p; p++) fprintf(stderr, " %02X", *p);
                fprintf(stderr, "\n");
            }
            tt_failures++;
        }
        free(got);
    }
    printf("%d NFC cases, %d mismatches\n", n, bad);
    CHECK(n > 3000);
    cJSON_Delete(j);

    /* unchanged text */
    const char *same[] = {"", "plain ASCII text\n", "caf\xc3\xa9 na\xc3\xafve", "\xe5\xb9\xb4\xe5\x81\x87"};
    for (size_t i = 0; i < sizeof same / sizeof *same; i++) {
        size_t len;
        char *got = tlm_nfc(same[i], strlen(same[i]), &len);
        CHECK(got && len == strlen(same[i]) && memcmp(got, same[i], len) == 0);
        free(got);
    }
    return tt_report("test_tokenizer_nfc");
}
