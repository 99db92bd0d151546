#[test] fn smoke(){}
