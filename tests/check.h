/* check.h — minimal assertions for the C unit tests: a failed CHECK prints file:line and the test exits 1.
 *
 *   int main(void) {
 *       CHECK(x == 3);
 *       CHECK_NEAR(got, want, 1e-6);
 *       CHECK_OK(assay_json_parse(s, n, &doc));
 *       return check_finish("json");   // prints "json: 12 checks passed" or the failure count, sets exit code
 *   }
 *
 * Paths to shared data come from the environment ctest sets (ASSAY_SHARED); check_shared_path builds them.
 */
#ifndef ASSAY_TESTS_CHECK_H
#define ASSAY_TESTS_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assay/status.h"

static int check_passed, check_failed;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (cond) check_passed++;                                                                  \
        else {                                                                                     \
            check_failed++;                                                                        \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);               \
        }                                                                                          \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                                      \
    do {                                                                                           \
        double check_a_ = (double)(a), check_b_ = (double)(b);                                     \
        if (fabs(check_a_ - check_b_) <= (tol)) check_passed++;                                    \
        else {                                                                                     \
            check_failed++;                                                                        \
            fprintf(stderr, "%s:%d: CHECK_NEAR failed: %s = %.9g, %s = %.9g, tolerance %g\n", __FILE__, \
                    __LINE__, #a, check_a_, #b, check_b_, (double)(tol));                          \
        }                                                                                          \
    } while (0)

#define CHECK_OK(expr)                                                                             \
    do {                                                                                           \
        assay_status check_st_ = (expr);                                                           \
        if (check_st_ == ASSAY_OK) check_passed++;                                                 \
        else {                                                                                     \
            check_failed++;                                                                        \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #expr, assay_last_error()); \
        }                                                                                          \
    } while (0)

static inline int check_finish(const char *name) {
    if (check_failed) fprintf(stderr, "%s: %d checks failed, %d passed\n", name, check_failed, check_passed);
    else printf("%s: %d checks passed\n", name, check_passed);
    return check_failed ? 1 : (check_passed ? 0 : 1); /* a test that checked nothing fails */
}

/* $ASSAY_SHARED/<rel>, in a static buffer; exits 1 with a message when ASSAY_SHARED is unset. */
static inline const char *check_shared_path(const char *rel) {
    static char buf[4096];
    const char *root = getenv("ASSAY_SHARED");
    if (!root) {
        fprintf(stderr, "ASSAY_SHARED is not set (run the tests through ctest)\n");
        exit(1);
    }
    snprintf(buf, sizeof buf, "%s/%s", root, rel);
    return buf;
}

#endif
