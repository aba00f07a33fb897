/* The Domain lifecycle (spec 3.3, 3.6, 3.7; FR-7, FR-19, OR-6), as the
 * Host Coordinator's Lua sequence (lua/lazaret/runtime/launch.lua) and
 * core/runtime/coordinator.c run it: a generation is prepared (starting),
 * published once the network participant is active, served, and torn
 * down (stopping, stopped). Any role may be lost at any step: the Runtime
 * Supervisor (its PID namespace takes runsc and slirp4netns with it), the
 * attached runsc, slirp4netns, or the coordinator itself (kill -9). A lost
 * coordinator's supervisor tears down on its own (lease-loss path); the
 * next coordinator's bootstrap recovery records the lost generation failed
 * only once its processes are proved absent, and only then begins the
 * next. Generation states are the Domain Store's.
 *
 * Safety (assertions): a generation is published only with its supervisor,
 * runsc and connectivity helper alive and the network participant active;
 * a generation begins only when no other is live and the previous one's
 * processes are gone. Liveness (ltl, weak fairness): every generation
 * begun ends stopped or failed. */

#include "moves.inc"

mtype gen[2] = none;     /* the store's generation rows */
bool rs[2], runsc[2], slirp[2], net_active[2];
bool hc_lost = false;

inline lose_children(g)
{
	runsc[g] = false; slirp[g] = false; net_active[g] = false
}

/* Any process of generation g may die at any time. */
proctype Faults(byte g)
{
end:	do
	:: atomic { rs[g] -> rs[g] = false; lose_children(g) }
	:: atomic { runsc[g] -> runsc[g] = false }
	:: atomic { slirp[g] -> slirp[g] = false; net_active[g] = false }
	:: atomic { gen[g] == stopped || gen[g] == failed -> break }
	od
}

/* The supervisor of g when its coordinator is lost: it tears down alone. */
proctype Orphan(byte g)
{
end:	atomic { hc_lost && rs[g] -> rs[g] = false; lose_children(g) }
}

inline begin(g)
{
	atomic {
		assert(gen[0] != starting && gen[0] != published && gen[0] != stopping);
		assert(!rs[0] && !runsc[0] && !slirp[0]);
		move(generation, gen[g], starting)
	}
}

/* One coordinator running generation g from begin to end; it may die. */
inline run_generation(g)
{
	begin(g);
	atomic { rs[g] = true; slirp[g] = true; runsc[g] = true };
	if :: atomic { hc_lost = true; goto lost } :: skip fi;
	/* readiness: the RS attests the network (only while all live) */
	if
	:: atomic { rs[g] && slirp[g] && runsc[g] -> net_active[g] = true }
	:: atomic { !(rs[g] && slirp[g] && runsc[g]) -> move(generation, gen[g], failed); rs[g] = false; lose_children(g) };
		goto ended
	fi;
	if :: atomic { hc_lost = true; goto lost } :: skip fi;
	/* publication: the socket and the record together */
	atomic {
#ifndef BROKEN_PUBLISH_WITHOUT_CHECK
		if
		:: net_active[g] && rs[g] && runsc[g] && slirp[g] -> skip
		:: else -> move(generation, gen[g], failed); rs[g] = false; lose_children(g); goto ended
		fi;
#endif
		assert(net_active[g] && rs[g] && runsc[g] && slirp[g]);
		move(generation, gen[g], published)
	};
	if :: atomic { hc_lost = true; goto lost } :: skip fi;
	/* serve; teardown when the sessions end or a role is lost */
	atomic { move(generation, gen[g], stopping) };
	if :: atomic { hc_lost = true; goto lost } :: skip fi;
	atomic { rs[g] = false; lose_children(g); move(generation, gen[g], stopped) };
	goto ended;
lost:
	skip;
ended:
	skip
}

active proctype Coordinators()
{
	run Faults(0);
	run Orphan(0);
	run_generation(0);
	/* The next coordinator (the same one when none was lost). */
	if
	:: hc_lost ->
		/* Bootstrap recovery: absence first, then the record. */
#ifndef BROKEN_RECOVER_WITHOUT_ABSENCE
		(!rs[0] && !runsc[0] && !slirp[0]);
#endif
		atomic {
			if
			:: gen[0] == starting || gen[0] == published || gen[0] == stopping -> move(generation, gen[0], failed)
			:: else -> skip
			fi
		};
		hc_lost = false
	:: else -> skip
	fi;
	run Faults(1);
	run_generation(1);
	if
	:: hc_lost -> (!rs[1]) ; atomic { if :: gen[1] != stopped && gen[1] != failed -> move(generation, gen[1], failed) :: else -> skip fi }
	:: else -> skip
	fi
}

proctype Orphan1()
{
end:	atomic { hc_lost && rs[1] -> rs[1] = false; lose_children(1) }
}

init
{
	run Orphan1()
}

ltl generations_end { <> ((gen[0] == stopped || gen[0] == failed) && (gen[1] == stopped || gen[1] == failed)) }
