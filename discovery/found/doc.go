// Package found is the contract between the discovery sources and the
// pass that reads them: what one discovery of a source found (Yield). It
// is plain data and imports no cloud SDK, so every stage downstream can
// read it.
//
// Every source in discovery/* has one method, Discover(ctx) (Yield,
// error), and yields what it has: a DNS zone targets to probe, ACM and IAM
// certificates held at rest, the files and Kubernetes sources the
// certificates they hold (atrest), an AWS account the resources that serve
// certificates and the hosted zones it read. A new kind of source is one
// package and one case in assemble; a new kind of thing found is one
// field here, which policy learns to judge.
//
// # What a source found, apart from the source
//
// The packages below this one carry the records a source fills and the
// later stages read: acmcert (an ACM certificate), iamcert (an IAM server
// certificate), certconsumer (an AWS resource serving certificates),
// hostedzone (a Route 53 hosted zone) and ctcert (a certificate logged in
// Certificate Transparency). The fetchers that fill them (discovery/acm,
// discovery/iam, discovery/consumers, discovery/route53, discovery/ct)
// link SDKs and talk to the network; these packages, and this one, must
// not, so that policy, state, notify, scan, daemon and serve read what
// was found without linking how it was fetched.
//
// They hold plain types and pure functions only: no network or file I/O,
// no clock (a time is an argument or a field, never time.Now), no AWS
// SDK, YAML, DNS library, cron or Kubernetes client, and no certwatch
// package but discovery (for Target) and each other; this package also
// carries discovery/atrest's certificates at rest. CI checks their
// dependencies with go list -deps (.ci/run).
package found
