// Package feed carries what each serve process is doing to the person's
// console, and the person's answers and stops back.
//
// Every serve listens on its own Unix socket in the state directory's
// console folder (mode 0700, so only the user's own processes reach it;
// nothing the agent controls can). The console (a separate process)
// finds every socket there, connects to each, and keeps a Watcher's view
// of all of them: serves that start later are picked up, serves that die
// are dropped.
//
// A serve never waits on a console: events go into a bounded queue per
// watching console, and a console that stops reading loses events (it is
// told how many, then sent a fresh snapshot) instead of blocking an
// action. Output sent is the redacted text the agent gets, never more.
package feed
