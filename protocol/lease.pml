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
 * and that every run ends with no mount (progress via end states).
 * Liveness (ltl, weak fairness): every run ends with neither a mount nor a
 * lease. */

bool leased = false;     /* the catalog lease row exists */
bool mounted = false;    /* the exact overlay mount exists */
bool rs_alive = false;
bool hc_alive = true;

#include "moves.inc"
mtype lower = none;      /* Domain Store: prepared-lower participant */
mtype anchor = none;     /* Domain Store: State Anchor participant */

#define crash_point  if :: hc_alive = false; goto lost :: skip fi

active proctype HC()
{
	/* acquisition: 1. intent, 2. catalog lease (acquiring), 3. active */
	atomic { move(participant, lower, intent) };     crash_point;
	atomic { leased = true; move(participant, lower, acquiring) };  crash_point;
	atomic { move(participant, lower, is_active) };     crash_point;
	/* 4. anchor intent, then the RS mounts (acquiring), then active */
	atomic { move(participant, anchor, intent) };    crash_point;
	rs_alive = true;
	atomic { rs_alive -> mounted = true; move(participant, anchor, acquiring) };
	crash_point;
	atomic { move(participant, anchor, is_active) };    crash_point;
	/* release: 1. anchor release intent */
	atomic { move(participant, anchor, release) };   crash_point;
	/* 2. the RS unmounts exactly; 3. after absence: anchor clean and lower
	 * release intent in one transaction */
#ifdef BROKEN_RELEASE_BEFORE_UNMOUNT
	leased = false;
#endif
	atomic { mounted = false; rs_alive = false };
	crash_point;
	atomic { assert(!mounted); move(participant, anchor, clean); move(participant, lower, release) };
	crash_point;
	/* 4. under the catalog lock: recheck release intent and absence */
	atomic { assert(lower == release && !mounted); leased = false };
	crash_point;
	atomic { move(participant, lower, clean) };
	goto done;
lost:
	/* Lease loss: the surviving RS unmounts and exits; it never opens
	 * the catalog (spec 3.6). */
	atomic { mounted = false; rs_alive = false };
	/* Bootstrap recovery by the next coordinator: the anchor through
	 * release intent to clean once its mount is absent, then the lower. */
	atomic {
		assert(!mounted);
		if
		:: anchor == acquiring || anchor == is_active -> move(participant, anchor, release)
		:: else -> skip
		fi;
		if
		:: anchor == intent || anchor == release -> move(participant, anchor, clean)
		:: else -> skip
		fi
	};
	if
	:: lower == intent || lower == acquiring || lower == is_active -> atomic { assert(!mounted); move(participant, lower, release) }
	:: else -> skip
	fi;
	if
	:: leased -> atomic { assert(lower == release && !mounted); leased = false }
	:: else -> skip
	fi;
	if :: lower == release -> atomic { move(participant, lower, clean) } :: else -> skip fi;
done:
	assert(!mounted && !leased)
}

/* The invariant holds in every reachable state. */
active proctype Invariant()
{
	do
	:: atomic { assert(!mounted || leased); assert(anchor != is_active || mounted || !hc_alive) }
	od
}

ltl ends_unmounted_unleased { <> [] (!mounted && !leased) }
