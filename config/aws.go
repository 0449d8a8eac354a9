package config

// AWS configures Route53 and ACM discovery.
type AWS struct{}

func (a *AWS) applyDefaults() {}

func (a *AWS) validate() []error { return nil }
