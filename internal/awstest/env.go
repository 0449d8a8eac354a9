package awstest

import (
	"os"
	"path/filepath"
	"testing"
)

// Isolate points the AWS SDK's default configuration chain at nothing but
// this package's static key for the rest of tb: AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY are AccessKeyID and SecretAccessKey, the shared
// config and credentials files are empty temporary files, the instance
// metadata service is disabled (so the SDK never reaches for
// 169.254.169.254), and every other variable that could redirect
// credentials, region or endpoints is unset. Tests using it cannot run in
// parallel (it uses tb.Setenv).
func Isolate(tb testing.TB) {
	tb.Helper()
	dir := tb.TempDir()
	for _, name := range []string{"config", "credentials"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	set := map[string]string{
		"AWS_EC2_METADATA_DISABLED":   "true",
		"AWS_ACCESS_KEY_ID":           AccessKeyID,
		"AWS_SECRET_ACCESS_KEY":       SecretAccessKey,
		"AWS_CONFIG_FILE":             filepath.Join(dir, "config"),
		"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
	}
	for k, v := range set {
		tb.Setenv(k, v)
	}
	for _, k := range []string{
		"AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION",
		"AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_SESSION_NAME",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
		"AWS_CONTAINER_AUTHORIZATION_TOKEN", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
		"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_ACM", "AWS_ENDPOINT_URL_ROUTE_53", "AWS_ENDPOINT_URL_STS",
		"AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "AWS_EC2_METADATA_SERVICE_ENDPOINT",
		"AWS_USE_FIPS_ENDPOINT", "AWS_USE_DUALSTACK_ENDPOINT", "AWS_MAX_ATTEMPTS", "AWS_RETRY_MODE",
		"AWS_CA_BUNDLE", "AWS_SDK_LOAD_CONFIG",
	} {
		tb.Setenv(k, "") // restored after tb
		os.Unsetenv(k)
	}
}
