#pragma once
// Workers joining a running elastic job (`cohort train --respawn`, docs/elastic.md): the
// launcher starts a replacement for a worker it left behind, with COHORT_ELASTIC_JOIN=1; it
// connects the store only and asks to join; the workers admit it at their next step boundary.
//
//   joiner:  "elastic/attempt<A>/join/<launcher rank>" = 1, "joins" += 1; waits for
//            "admit/<launcher rank>" = "<generation> <rank> <size>"
//   rank 0:  after every step reads "joins"; when it moved, lists the launcher ranks asking to
//            join and broadcasts them to the workers (one small broadcast per step)
//   all:     the workers keep their ranks, the joiners take the next ones; rank 0 writes each
//            joiner's admit key; everyone forms the new communicator; rank 0 broadcasts the
//            training state (step, position, the model's parameters and buffers, the optimizer's
//            state): no disk; the rest of the epoch is dealt to the new world.
#include "cohort/train/trainer_state.h"

namespace cohort::train {

// The joiner's side, from the Trainer's constructor (after the model, optimizer and schedule
// exist, before the strategy): waits to be admitted (comm.timeout_s), then forms the world and
// takes the state. Throws Timeout naming the key when the job never admits it.
void join_running_job(Trainer::State& s);

// The workers' side, after every step of an elastic job: admits the workers asking to join,
// if any, and throws MembershipChanged once the new world is ready (the loop restarts there).
void admit_pending_joiners(Trainer::State& s);

}  // namespace cohort::train
