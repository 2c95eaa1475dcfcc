// Package tour is `actiongw demo`: it starts `actiongw serve -demo`, drives
// it through the real protocol with the project's own host client, and
// prints what an agent would see at each step, failing at the first step
// that does not behave.
package tour
