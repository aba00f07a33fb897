/* Session admission and release (spec 3.4 "Session Terminals", FR-14,
 * FR-15), as core/runtime/coordinator.c and core/session/session.c do it.
 * State names are the Domain Store's (session: intent, running, release,
 * clean; generation: starting, published, stopping).
 *
 * Two clients race the generation's publication; the coordinator admits a
 * session only while the generation is published, runs its exec client,
 * and on client loss or Detach releases it: SIGHUP, then SIGTERM, then
 * SIGKILL, each only if the previous did not end the guest. A clean
 * session never runs again and a lost client is never given its session
 * back (a new connection is a new session).
 *
 * Safety (assertions): no session before publication or after stopping
 * began; signals in the order HUP < TERM < KILL; clean only after the exec
 * client is gone; no reattachment. Liveness (ltl, weak fairness): every
 * session that runs ends clean; the generation stops. */

#define N 2

#include "moves.inc"

mtype gen = starting;
mtype state[N] = none;   /* the Domain Store's session row */
bool exec_alive[N];      /* the exec client (runsc exec) */
byte signals[N];         /* 0 none, 1 HUP, 2 TERM, 3 KILL sent */
bool done[N];            /* the client's connection has ended */

proctype Client(byte i)
{
	/* It connects at any time; the coordinator admits it only while the
	 * generation is published (the socket exists only then). */
	if
#ifdef BROKEN_ADMIT_BEFORE_PUBLICATION
	:: atomic { move(session, state[i], intent) }
#else
	:: atomic { gen == published -> move(session, state[i], intent) }
	:: atomic { gen != published -> done[i] = true }; goto end
#endif
	fi;
	/* spec 3.4 steps 2-4: exec client staged and committed, then running */
	atomic { assert(gen == published); exec_alive[i] = true; move(session, state[i], running) };
	/* The client leaves (Detach, SIGTERM, loss), or the guest ends. */
	if
	:: atomic { state[i] == running -> move(session, state[i], release); done[i] = true }
	:: atomic { exec_alive[i] = false }
	fi;
	(state[i] == clean);
	done[i] = true;
end:
	skip
}

/* The coordinator's side of one session slot. */
proctype Slot(byte i)
{
	do
	:: atomic { state[i] == release && exec_alive[i] && signals[i] < 3 ->
		signals[i]++;   /* HUP, then TERM, then KILL */
		if
		:: exec_alive[i] = false
		:: signals[i] < 3 -> skip   /* the guest ignores it */
		:: signals[i] == 3 -> exec_alive[i] = false
		fi }
	:: atomic { (state[i] == running || state[i] == release) && !exec_alive[i] ->
		if :: state[i] == running -> move(session, state[i], release) :: else -> skip fi;
		move(session, state[i], clean) }
	:: atomic { done[i] && (state[i] == clean || state[i] == none) -> break }
	od;
	/* No reattachment: once clean, never running again. */
	assert(state[i] == clean || state[i] == none)
}

active proctype HC()
{
	byte i;
	atomic {
		for (i : 0 .. N - 1) {
			run Client(i);
			run Slot(i)
		}
	};
	atomic { move(generation, gen, published) };   /* the socket and the record together */
	/* Serve until every connection has ended and every session is clean. */
	(done[0] && done[1] && state[0] != running && state[0] != release && state[0] != intent &&
	 state[1] != running && state[1] != release && state[1] != intent);
	atomic { move(generation, gen, stopping) }
}

ltl sessions_end_clean { [] ((state[0] == running) -> <> (state[0] == clean)) }
ltl generation_stops { <> (gen == stopping) }
