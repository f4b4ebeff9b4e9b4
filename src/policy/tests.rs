use super::*;

fn on(s: &str) -> ObjectName {
    ObjectName::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

fn policy(xml: &str) -> Policy {
    Policy::parse(xml).unwrap_or_else(|e| panic!("{e}\n{xml}"))
}

const SAMPLE: &str = r#"<restrict>
  <remote><host>planck</host><host>10.0.0.0/8</host></remote>
  <http><method>post</method></http>
  <commands><command>list</command><command>read</command></commands>
  <allow>
    <mbean><name>java.lang:type=Memory</name><operation>gc</operation>
      <attribute mode="read">Verbose</attribute></mbean>
    <mbean><name>java.lang:type=Threading</name><attribute>ThreadCount</attribute></mbean>
  </allow>
  <deny>
    <mbean><name>java.lang:type=Memory</name><attribute>NonHeap*</attribute></mbean>
  </deny>
</restrict>"#;

#[test]
fn policy_is_clone_send_sync_debug() {
    fn assert_traits<T: Clone + Send + Sync + std::fmt::Debug>() {}
    assert_traits::<Policy>();
}

#[test]
fn allow_all_allows_everything() {
    let p = Policy::allow_all();
    let m = on("java.lang:type=Memory");
    assert!(p.type_allowed("exec").allowed);
    assert!(p.http_method_allowed("GET").allowed);
    assert!(p.remote_allowed(&[]).allowed);
    assert!(p.origin_allowed(None, true) && p.origin_allowed(Some("http://x"), false));
    assert!(p.read_allowed(&m, "X").allowed && p.write_allowed(&m, "X").allowed);
    assert!(p.exec_allowed(&m, "gc()").allowed);
    assert!(!p.hidden(&m) && p.mbean_visible(&m));
    assert!(!p.ignore_scheme());
}

#[test]
fn decisions_name_their_rule() {
    let p = policy(SAMPLE);
    let memory = on("java.lang:type=Memory");
    let threading = on("java.lang:type=Threading");

    let d = p.type_allowed("exec");
    assert_eq!(
        (d.allowed, d.rule.as_str()),
        (false, "<commands> does not list \"exec\"")
    );
    let d = p.type_allowed("LIST");
    assert_eq!(
        (d.allowed, d.rule.as_str()),
        (true, "<commands> lists \"list\"")
    );
    assert!(!p.type_allowed("bogus").allowed);

    let d = p.exec_allowed(&memory, "gc");
    assert_eq!(
        (d.allowed, d.rule.as_str()),
        (true, "<allow> <mbean> java.lang:type=Memory <operation> gc")
    );
    let d = p.read_allowed(&threading, "PeakThreadCount");
    assert!(d.allowed, "read is listed: only <deny> counts");
    let d = p.write_allowed(&threading, "PeakThreadCount");
    assert_eq!(
        (d.allowed, d.rule.as_str()),
        (
            false,
            "<allow> has no rule for java.lang:type=Threading attribute PeakThreadCount (write)"
        )
    );
    let d = p.read_allowed(&memory, "NonHeapMemoryUsage");
    assert_eq!(
        (d.allowed, d.rule.as_str()),
        (
            false,
            "<deny> <mbean> java.lang:type=Memory <attribute> NonHeap*"
        )
    );
    let d = p.read_allowed(&memory, "HeapMemoryUsage");
    assert!(d.allowed);
    assert!(d.rule.contains("<deny> has no rule"), "{}", d.rule);
    assert!(!p.write_allowed(&memory, "Verbose").allowed, "mode=read");

    assert_eq!(
        Policy::allow_all().remote_allowed(&["x"]).rule,
        "no <remote> section"
    );
    assert!(p.remote_allowed(&["planck", "10.1.2.3"]).allowed);
    assert!(!p.remote_allowed(&["planck", "11.1.2.3"]).allowed);
    assert!(p.http_method_allowed("Post").allowed);
    assert!(!p.http_method_allowed("GET").allowed);
    assert!(!p.http_method_allowed("PUT").allowed);
}

#[test]
fn exec_signature_checks_the_bare_name_too() {
    let deny = policy(
        "<restrict><deny><mbean><name>java.lang:type=Memory</name><operation>gc</operation>\
         </mbean></deny></restrict>",
    );
    let m = on("java.lang:type=Memory");
    assert!(!deny.exec_allowed(&m, "gc").allowed);
    let d = deny.exec_allowed(&m, "gc()");
    assert!(!d.allowed);
    assert!(d.rule.contains("<operation> gc"), "{}", d.rule);
    assert!(deny.exec_allowed(&m, "gcx()").allowed);

    let allow = policy(
        "<restrict><commands/><allow><mbean><name>java.lang:type=Memory</name>\
         <operation>g*</operation><operation>op</operation></mbean></allow></restrict>",
    );
    assert!(allow.exec_allowed(&m, "gc()").allowed);
    assert!(allow.exec_allowed(&m, "op").allowed);
    assert!(
        !allow.exec_allowed(&m, "op(int)").allowed,
        "raw form not listed"
    );
}

/// An overloaded operation allowed by its signature, under a policy that
/// does not list `exec` (the bare name is not in <allow>): allowed, as a
/// Jolokia agent allows it under the same file.
#[test]
fn an_allow_of_one_overload_admits_exactly_that_overload() {
    let p = policy(
        "<restrict><commands><command>read</command></commands><allow><mbean>\
         <name>jmxgate.test:type=Operations</name>\
         <operation>echo(java.lang.String)</operation></mbean></allow></restrict>",
    );
    let m = on("jmxgate.test:type=Operations");
    let d = p.exec_allowed(&m, "echo(java.lang.String)");
    assert!(d.allowed, "{}", d.rule);
    assert!(!p.exec_allowed(&m, "echo(int)").allowed);
    assert!(
        !p.exec_allowed(&m, "echo").allowed,
        "as Jolokia: the string as sent"
    );
    // A <deny> of the bare name still stops every overload.
    let deny = policy(
        "<restrict><commands><command>exec</command></commands><deny><mbean>\
         <name>jmxgate.test:type=Operations</name><operation>echo</operation></mbean></deny>\
         <allow><mbean><name>jmxgate.test:type=Operations</name>\
         <operation>echo(java.lang.String)</operation></mbean></allow></restrict>",
    );
    assert!(!deny.exec_allowed(&m, "echo(java.lang.String)").allowed);
}

#[test]
fn patterns_in_requests_are_denied_and_policy_patterns_apply() {
    let p = policy(
        "<restrict><commands/><allow><mbean><name>java.lang:*</name>\
         <attribute>HeapMemoryUsage</attribute></mbean></allow></restrict>",
    );
    let d = p.read_allowed(&on("java.lang:*"), "HeapMemoryUsage");
    assert!(!d.allowed);
    assert!(d.rule.contains("pattern"), "{}", d.rule);
    assert!(
        p.read_allowed(&on("java.lang:type=Memory"), "HeapMemoryUsage")
            .allowed
    );
    assert!(
        !p.read_allowed(&on("java.nio:type=Memory"), "HeapMemoryUsage")
            .allowed
    );
}

#[test]
fn exact_entries_shadow_patterns_and_last_duplicate_wins() {
    let p = policy(
        "<restrict><commands/><allow>\
           <mbean><name>d:type=T</name><attribute>A</attribute></mbean>\
           <mbean><name>d:type=T</name><attribute>B</attribute></mbean>\
           <mbean><name>d:*</name><attribute>C</attribute></mbean>\
         </allow><mbeans><mbean><name>e:type=T</name><attribute>M</attribute></mbean></mbeans>\
         </restrict>",
    );
    let t = on("d:type=T");
    assert!(!p.read_allowed(&t, "A").allowed);
    assert!(p.read_allowed(&t, "B").allowed);
    assert!(!p.read_allowed(&t, "C").allowed);
    assert!(p.read_allowed(&on("d:type=U"), "C").allowed);
    assert!(
        p.read_allowed(&on("e:type=T"), "M").allowed,
        "<mbeans> is <allow>"
    );
}

#[test]
fn overlapping_patterns_are_combined_conservatively() {
    let allow = policy(
        "<restrict><commands/><allow>\
           <mbean><name>d:type=T,*</name><attribute>A</attribute><attribute>B</attribute></mbean>\
           <mbean><name>d:name=x,*</name><attribute>A</attribute></mbean>\
         </allow></restrict>",
    );
    let both = on("d:type=T,name=x");
    assert!(allow.read_allowed(&both, "A").allowed);
    let d = allow.read_allowed(&both, "B");
    assert!(!d.allowed, "one matching pattern does not allow B");
    assert!(allow.read_allowed(&on("d:type=T,name=y"), "B").allowed);

    let deny = policy(
        "<restrict><deny>\
           <mbean><name>d:type=T,*</name><attribute>A</attribute></mbean>\
           <mbean><name>d*:name=x,*</name><attribute>B</attribute></mbean>\
         </deny></restrict>",
    );
    assert!(!deny.read_allowed(&both, "A").allowed);
    assert!(!deny.read_allowed(&both, "B").allowed);
    assert!(deny.read_allowed(&both, "C").allowed);
}

#[test]
fn wildcard_values_in_deny_are_never_narrower_than_jolokia() {
    let p = policy(
        "<restrict><deny><mbean><name>d:type=T</name>\
           <attribute>Heap.*</attribute><attribute>a+b*</attribute>\
         </mbean></deny></restrict>",
    );
    let t = on("d:type=T");
    // `a+b*` is a regex to Jolokia: deny everything on this MBean
    let d = p.read_allowed(&t, "Anything");
    assert!(!d.allowed);
    assert!(d.rule.contains("regex"), "{}", d.rule);
    let p = policy(
        "<restrict><deny><mbean><name>d:type=T</name><attribute>Heap.*</attribute></mbean>\
         </deny></restrict>",
    );
    assert!(!p.read_allowed(&t, "Heap.Usage").allowed);
    assert!(
        !p.read_allowed(&t, "HeapXUsage").allowed,
        "Jolokia's '.' is any character"
    );
    assert!(p.read_allowed(&t, "Heap").allowed);
}

#[test]
fn visibility_for_list_and_search() {
    let p = policy(SAMPLE);
    // read is listed and nothing denies every attribute: visible
    assert!(p.mbean_visible(&on("any:type=Thing")));
    let p = policy(
        "<restrict><commands/><allow><mbean><name>java.lang:type=Memory</name>\
         <operation>gc</operation></mbean><mbean><name>java.lang:type=Empty</name></mbean>\
         </allow></restrict>",
    );
    assert!(p.mbean_visible(&on("java.lang:type=Memory")));
    assert!(!p.mbean_visible(&on("java.lang:type=Empty")));
    assert!(!p.mbean_visible(&on("java.lang:type=Threading")));
    let p = policy(
        "<restrict><deny><mbean><name>jdk.management.jfr:*</name><attribute>*</attribute>\
         <operation>*</operation></mbean></deny></restrict>",
    );
    assert!(!p.mbean_visible(&on("jdk.management.jfr:type=FlightRecorder")));
    assert!(p.mbean_visible(&on("java.lang:type=Memory")));
}

#[test]
fn filters_hide_but_do_not_restrict() {
    let p =
        policy("<restrict><filter><mbean>java.lang:type=MemoryPool</mbean></filter></restrict>");
    let pool = on("java.lang:type=MemoryPool,name=Metaspace");
    assert!(p.hidden(&pool));
    assert!(p.read_allowed(&pool, "Usage").allowed);
}

#[test]
fn load_errors() {
    for (xml, needle) in [
        (
            "<restrict><commands><command>foo</command></commands></restrict>",
            "foo",
        ),
        (
            "<restrict><commands><cmd>read</cmd></commands></restrict>",
            "Expected element command",
        ),
        (
            "<restrict><http><method>put</method></http></restrict>",
            "PUT",
        ),
        (
            "<restrict><remote><host>10.0.0.1/40</host></remote></restrict>",
            "10.0.0.1/40",
        ),
        (
            "<restrict><remote><name>x</name></remote></restrict>",
            "Expected element host",
        ),
        (
            "<restrict><allow><name>x</name></allow></restrict>",
            "Expected element mbean",
        ),
        (
            "<restrict><deny><mbean><name>bad</name></mbean></deny></restrict>",
            "bad",
        ),
        (
            "<restrict><allow><mbean><attribute>x</attribute></mbean></allow></restrict>",
            "No <name>",
        ),
        (
            "<restrict><cors><origin>x</origin></cors></restrict>",
            "allow-origin",
        ),
        (
            "<restrict><filter><mbean>a*b*</mbean></filter></restrict>",
            "Glob",
        ),
        (
            "<restrict><filter><name>a</name></filter></restrict>",
            "Expected element mbean",
        ),
        ("<restrict>", "well-formed"),
    ] {
        let err = Policy::parse(xml).expect_err(xml);
        assert!(err.message.contains(needle), "{xml}: {err}");
    }
}

#[test]
fn load_names_the_file() {
    let dir = std::env::temp_dir().join(format!("jmxgate-policy-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.xml");
    std::fs::write(
        &path,
        "<restrict><http><method>x</method></http></restrict>",
    )
    .unwrap();
    let err = Policy::load(&path).unwrap_err();
    assert_eq!(
        err.source_name.as_deref(),
        Some(path.display().to_string().as_str())
    );
    assert!(err.to_string().contains("bad.xml: HTTP method"), "{err}");
    std::fs::write(
        &path,
        "<restrict><http><method>get</method></http></restrict>",
    )
    .unwrap();
    assert!(
        Policy::load(&path)
            .unwrap()
            .http_method_allowed("get")
            .allowed
    );
    assert!(Policy::load(&dir.join("missing.xml")).is_err());
    std::fs::remove_dir_all(&dir).ok();
}

/// A 200-rule policy: 190 exact names, 10 patterns; the checks must stay
/// well under a microsecond each (asserted in optimised builds only).
#[test]
fn checks_are_fast_on_a_200_rule_policy() {
    let mut xml = String::from("<restrict><commands><command>read</command></commands><allow>");
    for i in 0..190 {
        xml.push_str(&format!(
            "<mbean><name>app{}:type=Service{i},name=n{i}</name><attribute>A{i}</attribute>\
             <attribute>B*</attribute><operation>op{i}</operation></mbean>",
            i % 7
        ));
    }
    for i in 0..10 {
        xml.push_str(&format!(
            "<mbean><name>app{i}:type=Pool,*</name><operation>reset*</operation></mbean>"
        ));
    }
    xml.push_str("</allow><deny>");
    for i in 0..20 {
        xml.push_str(&format!(
            "<mbean><name>app{i}:*</name><attribute>Secret{i}*</attribute></mbean>"
        ));
    }
    xml.push_str("</deny></restrict>");
    let p = policy(&xml);
    let names: Vec<ObjectName> = (0..50)
        .map(|i| on(&format!("app{}:type=Pool,name=p{i}", i % 10)))
        .chain((0..50).map(|i| on(&format!("app{}:type=Service{i},name=n{i}", i % 7))))
        .collect();
    let rounds = 200;
    let start = std::time::Instant::now();
    let mut allowed = 0usize;
    for _ in 0..rounds {
        for n in &names {
            allowed += usize::from(p.exec_allowed(n, "resetAll(int)").allowed);
            allowed += usize::from(p.read_allowed(n, "Secret3x").allowed);
            allowed += usize::from(p.exec_allowed(n, "op7").allowed);
        }
    }
    let checks = rounds * names.len() * 3;
    let per_check = start.elapsed() / checks as u32;
    eprintln!("{per_check:?} per check ({allowed} allowed of {checks})");
    assert!(allowed > 0);
    if !cfg!(debug_assertions) {
        assert!(
            per_check < std::time::Duration::from_micros(1),
            "{per_check:?}"
        );
    }
}

#[test]
fn could_ever_sees_commands_and_allow_entries() {
    // `<commands>` lists neither write nor exec, but `<allow>` grants gc
    // and ThreadCount (no mode: read and write).
    let sample = policy(SAMPLE);
    assert!(sample.could_ever("exec") && sample.could_ever("write"));
    let read_only = policy(
        "<restrict><commands><command>read</command><command>list</command></commands></restrict>",
    );
    assert!(!read_only.could_ever("exec") && !read_only.could_ever("write"));
    assert!(read_only.could_ever("read"));
    let read_mode = policy(
        r#"<restrict><commands><command>read</command></commands><allow><mbean><name>a:b=c</name><attribute mode="read">X</attribute></mbean></allow></restrict>"#,
    );
    assert!(!read_mode.could_ever("write"));
    assert!(Policy::allow_all().could_ever("exec"));
}
