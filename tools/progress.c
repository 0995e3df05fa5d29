/*
 * The progress bar (progress.h).
 */
#include "progress.h"

#include <unistd.h>

#include "cli.h"

#define BAR_WIDTH 24
#define REDRAW_SECONDS 0.1

void progress_start(progress *p, FILE *out, long epoch, long epochs, int64_t steps)
{
    p->out = out;
    p->terminal = isatty(fileno(out)) == 1;
    p->epoch = epoch;
    p->epochs = epochs;
    p->steps = steps;
    p->start = cli_now();
    p->last_draw = 0;
}

static void format_seconds(double seconds, char *out, size_t capacity)
{
    long s = seconds > 0 ? (long)(seconds + 0.5) : 0;
    snprintf(out, capacity, "%ld:%02ld", s / 60, s % 60);
}

void progress_update(progress *p, int64_t done, double loss, double accuracy,
                     double images_per_second)
{
    double now = cli_now();
    if (!p->terminal || (now - p->last_draw < REDRAW_SECONDS && done < p->steps))
        return;
    p->last_draw = now;
    char bar[BAR_WIDTH + 1], left[32];
    int filled = p->steps > 0 ? (int)(BAR_WIDTH * done / p->steps) : BAR_WIDTH;
    for (int i = 0; i < BAR_WIDTH; i++)
        bar[i] = i < filled ? '=' : (i == filled ? '>' : ' ');
    bar[BAR_WIDTH] = '\0';
    double elapsed = now - p->start;
    format_seconds(done > 0 ? elapsed * (double)(p->steps - done) / (double)done : 0, left,
                   sizeof left);
    fprintf(p->out,
            "\r\033[Kepoch %ld/%ld [%s] %lld/%lld  loss %.4f  acc %.2f%%  %.0f img/s  "
            "left %s",
            p->epoch, p->epochs, bar, (long long)done, (long long)p->steps, loss,
            100.0 * accuracy, images_per_second, left);
    fflush(p->out);
}

void progress_end(progress *p)
{
    if (p->terminal) {
        fprintf(p->out, "\r\033[K");
        fflush(p->out);
    }
}
