/* tree.h: the one walker of whole directory trees, for everything that visits or removes a
 * tree in the order the directories hand out their names (the tree remover, the unpacker's
 * finisher, the cgroup walks): depth first, never following a link, no recursion, at most
 * `max_open` directories open at once, whatever the depth. The walk the API serves (sorted,
 * in slices between requests) is fs/walk.c. */
#pragma once

typedef enum {
        /* An entry `name` of the directory `dirfd`, at `depth` (1: an entry of the top), of
         * `type` (a DT_* value, looked up without following a link when readdir did not say;
         * never DT_UNKNOWN but for a file type Linux does not have). Return SH_TREE_DESCEND
         * to enter it (a directory), 0 to go on with the next entry, or < 0 to stop. */
        SH_TREE_ENTRY,
        /* The directory `dirfd` itself was entered, at `depth` (0: the top; its name `name`,
         * "" for the top). Return 0, SH_TREE_SKIP to leave it without reading its entries (its
         * SH_TREE_LEAVE follows), or < 0 to stop. */
        SH_TREE_DIR,
        /* Every entry of directory `name` (in `dirfd`, at `depth`) was visited and it is
         * closed: the place for post-order work (rmdir). Return 0 or < 0 to stop. */
        SH_TREE_LEAVE,
        /* Something failed: `what` ("open", "opendir", "readdir", "stat") with errno `err`,
         * on `name` in `dirfd` (NULL name: the directory dirfd itself). An "open" that fails
         * with ENOTDIR or ELOOP means the entry is no directory (any more). Return 0 to go on
         * past it, or < 0 to stop. */
        SH_TREE_ERROR,
} sh_tree_kind;

typedef struct sh_tree_ev {
        sh_tree_kind kind;
        int dirfd;
        const char *name;
        unsigned depth;
        unsigned char type; /* SH_TREE_ENTRY */
        int err;            /* SH_TREE_ERROR */
        const char *what;   /* SH_TREE_ERROR */
} sh_tree_ev;

#define SH_TREE_DESCEND 1
#define SH_TREE_SKIP    2

typedef int (*sh_tree_fn)(const sh_tree_ev *ev, void *data);

/* Walk the tree below the directory `topfd` (not closed; its own offset is untouched), calling
 * fn for each event. A directory of depth d can be entered only while d < max_open (the top
 * counts as one open directory): descending further stops the walk with -ELOOP, so a
 * callback that may meet deeper trees checks the depth itself. Returns 0, the callback's
 * value < 0 that stopped the walk, or -errno when the top cannot be read. */
int sh_tree_walk(int topfd, unsigned max_open, sh_tree_fn fn, void *data);

/* The same walk a step at a time, for a caller that cuts it into steps between other work (the
 * remover in slices, sh/remove.h): sh_tree_open as sh_tree_walk begins (-errno when the top
 * cannot be read), then each sh_tree_step tells fn of one entry at most (and of its SH_TREE_DIR
 * when it is entered), or of one directory left ("." and ".." are passed over), and returns 1
 * while there is more, 0 at the end, or the callback's value < 0 that stopped the walk (or
 * -ELOOP past max_open); sh_tree_free closes what is open (accepts NULL). */
typedef struct sh_tree_walker sh_tree_walker;
int sh_tree_open(int topfd, unsigned max_open, sh_tree_walker **ret);
int sh_tree_step(sh_tree_walker *w, sh_tree_fn fn, void *data);
void sh_tree_free(sh_tree_walker *w);
