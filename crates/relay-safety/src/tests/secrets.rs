//! Secret detection and redaction, and lines refused for carrying a secret.

use super::super::reason::*;
use super::super::{Verdict, check_command, looks_like_secret, redact_secrets};

const AWS_KEY_ID: &str = "AKIAIOSFODNN7EXAMPLE";
const AWS_SECRET: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
const GH_TOKEN: &str = "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789";

/// (text, looks like a secret, redacted text)
const SECRETS: &[(&str, bool, &str)] = &[
    (
        "aws configure set aws_access_key_id AKIAIOSFODNN7EXAMPLE",
        true,
        "aws configure set aws_access_key_id [REDACTED]",
    ),
    ("ASIAY34FZKBOKMUTVV7A", true, "[REDACTED]"),
    (
        "aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        true,
        "aws_secret_access_key=[REDACTED]",
    ),
    (
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\nregion = us-east-1",
        true,
        "aws_secret_access_key = [REDACTED]\nregion = us-east-1",
    ),
    (
        "git clone https://ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789@github.com/o/r",
        true,
        "git clone https://[REDACTED]@github.com/o/r",
    ),
    (
        "gho_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
        true,
        "[REDACTED]",
    ),
    (
        "ghu_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
        true,
        "[REDACTED]",
    ),
    (
        "ghs_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
        true,
        "[REDACTED]",
    ),
    (
        "ghr_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
        true,
        "[REDACTED]",
    ),
    (
        "use github_pat_11ABCDEFG0123456789_abcdefghijKLMNOP now",
        true,
        "use [REDACTED] now",
    ),
    ("glpat-abcdefghij0123456789", true, "[REDACTED]"),
    ("SLACK=xoxb-1234567890-abcdefghij", true, "SLACK=[REDACTED]"),
    ("xoxp-1234567890-1234567890-abcdef", true, "[REDACTED]"),
    (
        "curl -X POST https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX -d x",
        true,
        "curl -X POST [REDACTED] -d x",
    ),
    (
        "stripe: sk_live_abcdefghijklmnop1234",
        true,
        "stripe: [REDACTED]",
    ),
    ("rk_live_abcdefghijklmnop1234", true, "[REDACTED]"),
    ("sk_test_abcdefghijklmnop1234", true, "[REDACTED]"),
    ("pk_live_abcdefghijklmnop1234", true, "[REDACTED]"),
    (
        "//registry.npmjs.org/:_authToken=npm_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
        true,
        "//registry.npmjs.org/:_authToken=[REDACTED]",
    ),
    (
        "OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz012345",
        true,
        "OPENAI_API_KEY=[REDACTED]",
    ),
    (
        "key sk-abcdefghijklmnopqrstuvwxyz here",
        true,
        "key [REDACTED] here",
    ),
    (
        "x-api-key: sk-ant-api03-abcdefghijklmnopqrstuv",
        true,
        "x-api-key: [REDACTED]",
    ),
    ("sk-ant-api03-abcdef", true, "[REDACTED]"),
    (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\ntail",
        true,
        "[REDACTED]\ntail",
    ),
    (
        "head -----BEGIN OPENSSH PRIVATE KEY----- b3BlbnNzaC1r",
        true,
        "head [REDACTED]",
    ),
    ("PASSWORD=hunter2hunter2", true, "PASSWORD=[REDACTED]"),
    (
        "db password=hunter2hunter2 user=bob",
        true,
        "db password=[REDACTED] user=bob",
    ),
    (
        "export DB_PASSWD='correct horse battery'",
        true,
        "export DB_PASSWD='[REDACTED]'",
    ),
    (
        "mysql --password s3cr3tpass -u root",
        true,
        "mysql --password [REDACTED] -u root",
    ),
    ("app --token=abcdefgh12", true, "app --token=[REDACTED]"),
    (
        "{\"api_key\": \"abcdefghijk\"}",
        true,
        "{\"api_key\": \"[REDACTED]\"}",
    ),
    (
        "client_secret: abcdefghijkl",
        true,
        "client_secret: [REDACTED]",
    ),
    ("MY_APIKEY=abcdefghij", true, "MY_APIKEY=[REDACTED]"),
    (
        "psql postgres://app:hunter2pw@db:5432/app",
        true,
        "psql postgres://app:[REDACTED]@db:5432/app",
    ),
    (
        "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.abc",
        true,
        "Authorization: Bearer [REDACTED]",
    ),
    (
        "a AKIAIOSFODNN7EXAMPLE b ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789 c",
        true,
        "a [REDACTED] b [REDACTED] c",
    ),
    // a short value is still a password (issue 12 item 5: `DB_PASSWORD=hunter2`)
    ("password=short", true, "password=[REDACTED]"),
    // not secrets
    ("password=$DB_PASS", false, "password=$DB_PASS"),
    ("TOKEN=${GITHUB_TOKEN}", false, "TOKEN=${GITHUB_TOKEN}"),
    (
        "docker login --password-stdin",
        false,
        "docker login --password-stdin",
    ),
    (
        "task-1234567890abcdefghijklmn",
        false,
        "task-1234567890abcdefghijklmn",
    ),
    ("ghp_short", false, "ghp_short"),
    ("AKIA1234", false, "AKIA1234"),
    ("XAKIAIOSFODNN7EXAMPLE", false, "XAKIAIOSFODNN7EXAMPLE"),
    ("echo hello world", false, "echo hello world"),
    ("max_tokens=100000000", false, "max_tokens=100000000"),
    (
        "https://example.com:8080/path@x",
        false,
        "https://example.com:8080/path@x",
    ),
    ("unicode ünïcödé ok", false, "unicode ünïcödé ok"),
    ("", false, ""),
];

#[test]
fn secrets_detected_and_redacted() {
    for &(text, secret, redacted) in SECRETS {
        assert_eq!(looks_like_secret(text), secret, "{text:?}");
        assert_eq!(redact_secrets(text), redacted, "{text:?}");
    }
}

#[test]
fn allowed_line_with_secret_is_refused() {
    for secret in [
        AWS_KEY_ID,
        GH_TOKEN,
        "glpat-abcdefghij0123456789",
        "sk_live_abcdefghijklmnop1234",
    ] {
        assert_eq!(
            check_command(&format!("ls -la {secret}")),
            Verdict::Refuse(SECRET)
        );
    }
    let with_secret = format!("aws_secret_access_key={AWS_SECRET} aws s3 ls");
    assert_eq!(check_command(&with_secret), Verdict::Refuse(SECRET));
    assert_eq!(check_command("ls -la"), Verdict::Allow);
}
