package main

import (
	"math"
	"math/rand/v2"
)

// CartPole is the classic control task (Barto, Sutton and Anderson 1983, as
// OpenAI Gym's CartPole-v1 writes it): a pole hinged on a cart that moves
// along a track; each step pushes the cart left or right with a force of
// 10 N and earns a reward of 1. An episode ends when the pole leans more
// than 12 degrees, the cart leaves the track (|x| > 2.4) or MaxSteps steps
// have passed. A random policy keeps the pole up for about 22 steps.
type CartPole struct {
	X, XDot, Theta, ThetaDot float64
	Steps                    int // steps of this episode so far
	MaxSteps                 int // an episode is cut off here
	rng                      *rand.Rand
}

// The physics of Gym's CartPole-v1, integrated with explicit Euler steps.
const (
	gravity    = 9.8
	massCart   = 1.0
	massPole   = 0.1
	totalMass  = massCart + massPole
	halfLength = 0.5 // half the pole's length
	poleML     = massPole * halfLength
	forceMag   = 10.0
	tau        = 0.02 // seconds per step
	thetaLimit = 12 * 2 * math.Pi / 360
	xLimit     = 2.4
)

// NewCartPole returns an environment whose starting states come from rng.
func NewCartPole(maxSteps int, rng *rand.Rand) *CartPole {
	c := &CartPole{MaxSteps: maxSteps, rng: rng}
	c.Reset()
	return c
}

// Reset starts an episode: every state variable uniform in ±0.05.
func (c *CartPole) Reset() []float32 {
	u := func() float64 { return c.rng.Float64()*0.1 - 0.05 }
	c.X, c.XDot, c.Theta, c.ThetaDot, c.Steps = u(), u(), u(), u(), 0
	return c.Obs()
}

// Obs is the observation: x, x', θ, θ'.
func (c *CartPole) Obs() []float32 {
	return []float32{float32(c.X), float32(c.XDot), float32(c.Theta), float32(c.ThetaDot)}
}

// Step applies action (0 pushes left, 1 right) and returns the next
// observation, the reward, whether the pole fell or the cart left the
// track (terminal), and whether the episode is over (terminal or cut off).
func (c *CartPole) Step(action int) (obs []float32, reward float32, terminal, over bool) {
	force := -forceMag
	if action == 1 {
		force = forceMag
	}
	cos, sin := math.Cos(c.Theta), math.Sin(c.Theta)
	temp := (force + poleML*c.ThetaDot*c.ThetaDot*sin) / totalMass
	thetaAcc := (gravity*sin - cos*temp) / (halfLength * (4.0/3.0 - massPole*cos*cos/totalMass))
	xAcc := temp - poleML*thetaAcc*cos/totalMass
	c.X += tau * c.XDot
	c.XDot += tau * xAcc
	c.Theta += tau * c.ThetaDot
	c.ThetaDot += tau * thetaAcc
	c.Steps++
	terminal = math.Abs(c.X) > xLimit || math.Abs(c.Theta) > thetaLimit
	return c.Obs(), 1, terminal, terminal || c.Steps >= c.MaxSteps
}
