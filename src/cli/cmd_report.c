/* tinylm report — an experiment description (JSON, schema in src/report/report.h) as one
 * self-contained HTML page: title, claim, verdict, tables, inline SVG figures, notes, command.
 *   tinylm report DATA.json --html OUT.html */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "report/report.h"
#include "util/error.h"
#include "util/io.h"

static const char USAGE[] =
    "usage: tinylm report DATA.json --html OUT.html\n"
    "  DATA.json  an experiment description: {\"kind\": \"experiment\", \"title\", \"claim\", \"verdict\",\n"
    "             \"tables\", \"figures\" (inline SVG), \"notes\", \"command\"} (src/report/report.h)\n"
    "  --html F   the page to write (one self-contained file, written atomically)\n";

int cmd_report(int argc, char **argv) {
    const char *html = NULL, *args[1] = {NULL};
    cli_opt opts[] = {{"--html", CLI_STR, &html, 0, 0, 0}};
    cli_command cmd = {"report", USAGE, opts, 1, 0, args, 1, 0, NULL};
    int prc = cli_parse(&cmd, argc, argv);
    if (prc != CLI_CONTINUE) return prc;
    if (cmd.n_args != 1) return cli_usage_error("report", "give one DATA.json (an experiment description)");
    if (!html) return cli_usage_error("report", "--html OUT.html is required");
    if (tlm_output_check(html)) return cli_fail("report");
    size_t n = 0;
    char *text = read_text_file(args[0], &n);
    if (!text) return cli_fail("report");
    int rc = report_experiment_html(args[0], text, n, html);
    free(text);
    return rc ? cli_fail("report") : 0;
}
