/* The schedule as a Graphviz digraph (schedule.h: schedule_dot), for
 * TVK_GRAPH: what became a kernel, what was materialised and why. */
#include <stdio.h>

#include "schedule/schedule.h"

/* Writes s as a double-quoted DOT string: quotes and backslashes escaped,
 * a newline as DOT's \n (a centred line break). */
static void dot_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '\n') {
      fputs("\\n", f);
      continue;
    }
    if (*s == '"' || *s == '\\') fputc('\\', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

void schedule_dot(FILE *f, const Schedule *s, const char *const *names) {
  char text[400], why[256], label[700];
  fprintf(f,
          "digraph tvk_schedule {\n  rankdir=LR;\n  node [fontname=\"monospace\" fontsize=10];\n");
  /* buffers no kernel of the schedule writes: inputs that existed */
  for (int i = 0; i < s->nbufs; i++) {
    if (s->bufs[i].node) continue;
    schedule_buf_str(s, i, text, sizeof text);
    fprintf(f, "  b%d [shape=ellipse label=", i);
    dot_str(f, text);
    fprintf(f, "];\n");
  }
  for (int k = 0; k < s->nitems; k++) {
    const ScheduleItem *it = &s->items[k];
    fprintf(f, "  subgraph cluster_%d {\n    style=rounded; color=gray40; label=", k);
    snprintf(label, sizeof label, "[%d] %s", k, names && names[k] ? names[k] : "kernel");
    dot_str(f, label);
    fprintf(f, ";\n    k%d [shape=box style=filled fillcolor=lightblue label=", k);
    dot_str(f, names && names[k] ? names[k] : "kernel");
    fprintf(f, "];\n");
    for (int j = 0; j < it->nout; j++) {
      int b = it->bufs[j];
      schedule_buf_str(s, b, text, sizeof text);
      schedule_why_str(s, b, why, sizeof why);
      snprintf(label, sizeof label, "%s\n%s", text, why);
      fprintf(f, "    b%d [shape=ellipse style=bold label=", b);
      dot_str(f, label);
      fprintf(f, "];\n    k%d -> b%d;\n", k, b);
    }
    fprintf(f, "  }\n");
    for (int j = it->nout; j < it->nbufs; j++) fprintf(f, "  b%d -> k%d;\n", it->bufs[j], k);
  }
  /* nodes needing no kernel (zero elements) */
  for (int i = 0; i < s->nbufs; i++) {
    if (!s->bufs[i].node || s->bufs[i].numel != 0) continue;
    schedule_buf_str(s, i, text, sizeof text);
    schedule_why_str(s, i, why, sizeof why);
    snprintf(label, sizeof label, "%s (no kernel)\n%s", text, why);
    fprintf(f, "  b%d [shape=ellipse style=dashed label=", i);
    dot_str(f, label);
    fprintf(f, "];\n");
  }
  fprintf(f, "}\n");
}
