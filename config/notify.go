package config

// Notify configures alert state, channels and routing.
type Notify struct{}

func (n *Notify) applyDefaults() {}

func (n *Notify) validate() []error { return nil }
