/* wilcoxon_cases.c — test support: the signed-rank test on cases read from stdin, one per line, for a Python test
 * to compare with scipy.stats.wilcoxon.
 *
 *   input line:  x1 x2 ... xn | y1 y2 ... yn
 *   output line: statistic p_value method n_zero     ("nan" where undefined; %.17g otherwise)
 *
 * Exit code 0, or 2 on a malformed line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assay/wilcoxon.h"

static int parse(char *s, double **v, int64_t *n) {
    int64_t cap = 16;
    *v = malloc((size_t)cap * sizeof **v);
    *n = 0;
    for (char *tok = strtok(s, " \t\r\n"); tok; tok = strtok(NULL, " \t\r\n")) {
        char *end;
        double x = strtod(tok, &end);
        if (*end) return 0;
        if (*n == cap) *v = realloc(*v, (size_t)(cap *= 2) * sizeof **v);
        (*v)[(*n)++] = x;
    }
    return 1;
}

int main(void) {
    static char line[1 << 20];
    while (fgets(line, sizeof line, stdin)) {
        char *bar = strchr(line, '|');
        if (!bar) return 2;
        *bar = 0;
        double *x, *y;
        int64_t nx, ny;
        if (!parse(line, &x, &nx) || !parse(bar + 1, &y, &ny) || nx != ny) return 2;
        assay_wilcoxon w;
        assay_wilcoxon_signed_rank(x, y, nx, &w);
        printf("%.17g %.17g %s %lld\n", w.statistic, w.p_value, assay_wilcoxon_method_name(w.method), (long long)w.n_zero);
        free(x);
        free(y);
    }
    return 0;
}
