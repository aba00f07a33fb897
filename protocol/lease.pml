/* Prepared-lower lease and State Anchor mount ordering (spec 3.6, "lease
 * acquisition" and "unmount and lease-release" refinements; the TLA+ model is
 * not available to this project, C-REFINEMENT.md).
 *
 * Processes: the Host Coordinator (HC) runs the acquisition and release
 * steps in the order core/coordinator.c follows; it may crash at any step.
 * The Runtime Supervisor (RS) creates and removes the mount; when the HC is
 * lost it unmounts (lease-loss path) but never touches the catalog. A
 * bootstrap coordinator (a new HC) recovers: it only removes the lease after
 * the exact mount is absent.
 *
 * Checked invariants (spin -a, safety):
 *   mounted -> leased          a mounted State Anchor is never unleased
 *   anchor_active -> mounted   an active anchor has its mount
 *   no lease removal while mounted (same as the first, at the removal step)
 * and that every run ends with no mount (progress via end states). */

bool leased = false;     /* the catalog lease row exists */
bool mounted = false;    /* the exact overlay mount exists */
bool rs_alive = false;
bool hc_alive = true;

mtype = { absent, intent, held, release, clean };
mtype lower = absent;    /* Domain Store: prepared-lower participant */
mtype anchor = absent;   /* Domain Store: State Anchor participant */

#define crash_point  if :: hc_alive = false; goto lost :: skip fi

active proctype HC()
{
	/* acquisition: 1. intent, 2. catalog lease, 3. held */
	lower = intent;            crash_point;
	leased = true;             crash_point;
	lower = held;              crash_point;
	/* 4. anchor intent, then the RS mounts, then anchor active */
	anchor = intent;           crash_point;
	rs_alive = true;
	atomic { rs_alive -> mounted = true };
	crash_point;
	anchor = held;             crash_point;
	/* release: 1. anchor release intent */
	anchor = release;          crash_point;
	/* 2. the RS unmounts exactly; 3. after absence: anchor clean and lower
	 * release intent in one transaction */
	atomic { mounted = false; rs_alive = false };
	crash_point;
	atomic { assert(!mounted); anchor = clean; lower = release };
	crash_point;
	/* 4. under the catalog lock: recheck release intent and absence */
	atomic { assert(lower == release && !mounted); leased = false };
	crash_point;
	lower = clean;
	goto done;
lost:
	/* Lease loss: the surviving RS unmounts and exits; it never opens
	 * the catalog (spec 3.6). */
	atomic { mounted = false; rs_alive = false };
	/* Bootstrap recovery by the next coordinator. */
	if
	:: anchor == intent || anchor == held || anchor == release ->
		atomic { assert(!mounted); anchor = clean;
			 if :: lower != absent -> lower = release :: else -> skip fi }
	:: else -> skip
	fi;
	if
	:: lower == intent -> lower = release
	:: lower == held -> atomic { assert(!mounted); lower = release }
	:: else -> skip
	fi;
	if
	:: leased -> atomic { assert(lower == release && !mounted); leased = false }
	:: else -> skip
	fi;
	if :: lower != absent -> lower = clean :: else -> skip fi;
done:
	assert(!mounted && !leased)
}

/* The invariant holds in every reachable state. */
active proctype Invariant()
{
	do
	:: atomic { assert(!mounted || leased); assert(anchor != held || mounted || !hc_alive) }
	od
}
