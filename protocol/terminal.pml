/* Terminal routing (spec 3.4, 3.8; FR-15, DX-4), as core/session/session.c
 * and the coordinator's prompt do it, for two sessions.
 *
 * Each session's route is the sandbox (guest output read from its PTY
 * master and sent to its own client, one Output in flight at most) or the
 * prompt (a host escalation waits for the developer: the master is not
 * read, so the guest blocks in the kernel's bounded PTY buffer; the prompt
 * text goes out; typed input answers the prompt and never reaches the
 * guest). A host process's output never takes the terminal: it goes back
 * to the requesting sandbox as result records (escalation.pml).
 *
 * Safety (assertions): a client receives only its own session's records;
 * nothing of the guest reaches a client while its prompt is up; input
 * typed at a prompt never reaches the guest; at most one Output in flight
 * and at most K bytes in the kernel buffer per session. Liveness (ltl,
 * weak fairness): a prompt is taken down once answered; a guest that
 * writes gets its output to its client. */

#define K 2   /* the kernel's PTY buffer, in units */

mtype = { sandbox, prompt };
mtype = { guest_output, prompt_text };

mtype route[2] = sandbox;
byte pty[2];          /* guest output in the kernel buffer */
byte guest_input[2];  /* input written to the master */
bool answered[2];
chan to_client[2] = [1] of { byte, mtype };   /* one Output in flight */

proctype Guest(byte s)
{
	do
	:: atomic { pty[s] < K -> pty[s]++ }   /* blocks on a full buffer */
	:: pty[s] == K -> skip
	od
}

proctype Client(byte s)
{
	byte who;
	mtype what;
	do
	:: atomic { to_client[s] ? who, what ->
		assert(who == s);
		assert(what == prompt_text || route[s] == sandbox) }
	:: atomic { route[s] == prompt && !answered[s] -> answered[s] = true }   /* y or n */
	:: atomic { route[s] == sandbox && guest_input[s] < 2 -> guest_input[s]++ }   /* typed to the guest */
	od
}

/* The coordinator's loop for session s. */
proctype Route(byte s)
{
	byte input_at_prompt, requests = 0;
	do
	/* the master is read only on the sandbox route with nothing in flight */
#ifdef BROKEN_READ_DURING_PROMPT
	:: atomic { pty[s] > 0 && nfull(to_client[s]) -> pty[s]--; to_client[s] ! s, guest_output }
#else
	:: atomic { route[s] == sandbox && pty[s] > 0 && nfull(to_client[s]) ->
		pty[s]--; to_client[s] ! s, guest_output }
#endif
	/* a request of this session's sandbox (finitely many): the prompt goes up */
	:: atomic { route[s] == sandbox && empty(to_client[s]) && requests < 2 ->
		requests++; route[s] = prompt; answered[s] = false; input_at_prompt = guest_input[s];
		to_client[s] ! s, prompt_text }
	/* the answer takes it down; the guest's input was untouched */
	:: atomic { route[s] == prompt && answered[s] ->
		assert(guest_input[s] == input_at_prompt); route[s] = sandbox }
	od
}

init
{
	atomic {
		run Guest(0); run Client(0); run Route(0);
		run Guest(1); run Client(1); run Route(1)
	}
}

ltl prompt_taken_down { [] ((route[0] == prompt && answered[0]) -> <> (route[0] == sandbox)) }
ltl output_reaches_client { [] ((pty[0] == K) -> <> (pty[0] < K)) }
