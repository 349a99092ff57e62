use super::*;
use http::HeaderValue;
use switchyard_core::header_names;

fn tenants() -> AdmissionConfig {
    AdmissionConfig {
        tenants: vec![
            TenantConfig {
                api_key: "key-pay".into(),
                caller: "paying".into(),
                max_priority: Priority::P0,
                core: true,
                allow_warmup: true,
                ..TenantConfig::default()
            },
            TenantConfig {
                api_key: "key-free".into(),
                caller: "free".into(),
                max_priority: Priority::P1,
                ..TenantConfig::default()
            },
        ],
        ..AdmissionConfig::default()
    }
}

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.insert(*name, HeaderValue::from_str(value).unwrap());
    }
    map
}

#[test]
fn with_no_tenants_everyone_is_anonymous_at_p1() {
    let identity = Identity::new(&AdmissionConfig::default());
    assert!(identity.is_anonymous());
    let tags = identity.resolve(&HeaderMap::new(), Instant::now()).unwrap();
    assert_eq!(tags, RequestTags::anonymous());
    let asked_p0 = identity
        .resolve(&headers(&[(header_names::PRIORITY, "P0")]), Instant::now())
        .unwrap();
    assert_eq!(
        asked_p0.priority,
        Priority::P1,
        "clamped to the anonymous ceiling"
    );
}

#[test]
fn missing_or_unknown_keys_are_unauthorized_once_tenants_exist() {
    let identity = Identity::new(&tenants());
    let now = Instant::now();
    assert_eq!(
        identity.resolve(&HeaderMap::new(), now),
        Err(IdentityError::Unauthorized)
    );
    let wrong = headers(&[("authorization", "Bearer nope")]);
    assert_eq!(
        identity.resolve(&wrong, now),
        Err(IdentityError::Unauthorized)
    );
    let basic = headers(&[("authorization", "Basic key-pay")]);
    assert_eq!(
        identity.resolve(&basic, now),
        Err(IdentityError::Unauthorized)
    );
    let ok = identity
        .resolve(&headers(&[("authorization", "bearer key-pay")]), now)
        .unwrap();
    assert_eq!(&*ok.caller, "paying");
    assert!(ok.core_caller);
    assert_eq!(ok.priority, Priority::P0, "default priority is the ceiling");
    let via_x_api_key = identity
        .resolve(&headers(&[(header_names::API_KEY, "key-free")]), now)
        .unwrap();
    assert_eq!(&*via_x_api_key.caller, "free");
}

#[test]
fn priority_is_clamped_to_the_callers_ceiling() {
    let identity = Identity::new(&tenants());
    let now = Instant::now();
    let free_p0 = headers(&[
        (header_names::API_KEY, "key-free"),
        (header_names::PRIORITY, "P0"),
    ]);
    assert_eq!(
        identity.resolve(&free_p0, now).unwrap().priority,
        Priority::P1
    );
    let free_p2 = headers(&[
        (header_names::API_KEY, "key-free"),
        (header_names::PRIORITY, "p2"),
    ]);
    assert_eq!(
        identity.resolve(&free_p2, now).unwrap().priority,
        Priority::P2
    );
    let garbage = headers(&[
        (header_names::API_KEY, "key-free"),
        (header_names::PRIORITY, "urgent"),
    ]);
    assert!(matches!(
        identity.resolve(&garbage, now),
        Err(IdentityError::BadHeader {
            header: header_names::PRIORITY,
            ..
        })
    ));
}

#[test]
fn warmup_needs_permission_and_gateway_purposes_are_forbidden() {
    let identity = Identity::new(&tenants());
    let now = Instant::now();
    let allowed = headers(&[
        (header_names::API_KEY, "key-pay"),
        (header_names::PURPOSE, "warmup"),
    ]);
    assert_eq!(
        identity.resolve(&allowed, now).unwrap().purpose,
        Purpose::Warmup
    );
    let denied = headers(&[
        (header_names::API_KEY, "key-free"),
        (header_names::PURPOSE, "warmup"),
    ]);
    assert!(matches!(
        identity.resolve(&denied, now),
        Err(IdentityError::Forbidden(_))
    ));
    for purpose in ["retry", "probe"] {
        let spoofed = headers(&[
            (header_names::API_KEY, "key-pay"),
            (header_names::PURPOSE, purpose),
        ]);
        assert!(matches!(
            identity.resolve(&spoofed, now),
            Err(IdentityError::Forbidden(_))
        ));
    }
    let unknown = headers(&[
        (header_names::API_KEY, "key-pay"),
        (header_names::PURPOSE, "fun"),
    ]);
    assert!(matches!(
        identity.resolve(&unknown, now),
        Err(IdentityError::BadHeader {
            header: header_names::PURPOSE,
            ..
        })
    ));
}

#[test]
fn retries_come_from_the_header_or_a_repeated_request_id() {
    let identity = Identity::new(&tenants());
    let now = Instant::now();
    let counted = headers(&[
        (header_names::API_KEY, "key-free"),
        (header_names::RETRY_COUNT, "3"),
    ]);
    assert_eq!(identity.resolve(&counted, now).unwrap().client_retry, 3);
    let bad_count = headers(&[
        (header_names::API_KEY, "key-free"),
        (header_names::RETRY_COUNT, "-1"),
    ]);
    assert!(identity.resolve(&bad_count, now).is_err());

    let with_id = headers(&[
        (header_names::API_KEY, "key-free"),
        (header_names::REQUEST_ID, "req-1"),
    ]);
    assert_eq!(identity.resolve(&with_id, now).unwrap().client_retry, 0);
    let again = now + Duration::from_secs(10);
    assert_eq!(identity.resolve(&with_id, again).unwrap().client_retry, 1);
    let later = again + Duration::from_secs(61);
    assert_eq!(
        identity.resolve(&with_id, later).unwrap().client_retry,
        0,
        "window passed"
    );
    let other_caller = headers(&[
        (header_names::API_KEY, "key-pay"),
        (header_names::REQUEST_ID, "req-1"),
    ]);
    assert_eq!(
        identity.resolve(&other_caller, later).unwrap().client_retry,
        0
    );
}

#[test]
fn caller_labels_fold_beyond_the_top_n() {
    let mut config = tenants();
    config.identity.caller_label_top_n = 1;
    let identity = Identity::new(&config);
    assert_eq!(identity.caller_label("paying"), "paying");
    assert_eq!(identity.caller_label("free"), OTHER);
    assert_eq!(identity.caller_label("stranger"), OTHER);
    assert_eq!(identity.caller_label(ANONYMOUS), ANONYMOUS);
}

#[test]
fn anonymous_access_is_an_explicit_setting() {
    let mut deny = AdmissionConfig::default();
    deny.identity.anonymous = AnonymousAccess::Deny;
    let identity = Identity::new(&deny);
    assert!(!identity.is_anonymous());
    assert_eq!(
        identity.resolve(&HeaderMap::new(), Instant::now()),
        Err(IdentityError::Unauthorized),
        "deny refuses keyless requests even with no tenants"
    );

    let mut allow = tenants();
    allow.identity.anonymous = AnonymousAccess::Allow;
    let identity = Identity::new(&allow);
    let keyless = identity.resolve(&HeaderMap::new(), Instant::now()).unwrap();
    assert_eq!(&*keyless.caller, ANONYMOUS);
    assert_eq!(keyless.priority, Priority::P1);
    let wrong = headers(&[("authorization", "Bearer nope")]);
    assert_eq!(
        identity.resolve(&wrong, Instant::now()),
        Err(IdentityError::Unauthorized),
        "a wrong key is refused, not downgraded to anonymous"
    );
    let paying = headers(&[("authorization", "Bearer key-pay")]);
    assert_eq!(
        &*identity.resolve(&paying, Instant::now()).unwrap().caller,
        "paying"
    );
}

#[test]
fn the_identity_table_keeps_no_key_text() {
    let identity = Identity::new(&tenants());
    let debug = format!("{:?}", identity.by_api_key);
    assert!(
        !debug.contains("key-pay") && !debug.contains("key-free"),
        "{debug}"
    );
}
